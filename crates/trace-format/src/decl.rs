//! Every verb the shim records, declared once. [`ibverbs!`] hands the one
//! table to a macro of the caller's: this crate makes the trace's
//! descriptors from it ([`crate::verbs`]); the shim makes each verb's real
//! function slot, its typed record and (for `forward` verbs) the whole
//! export from the same entries. The launcher reads the descriptors
//! without the shim; the C types here are never resolved in this crate.
//!
//! An entry:
//!
//! ```text
//! ID CONST Slot = kind c_name(arg: CType => Show, ... [; extra: Type => Show, ...])
//!     -> CReturn => Show [(result_extra: Type)];
//! ```
//!
//! - `ID` is the record's verb id in the trace file (never reused), `CONST`
//!   the descriptor's name, `Slot` the shim's type for the verb.
//! - `kind`: `export` (the shim writes the export in Rust; its signature is
//!   checked against this one when the shim is compiled), `forward` (the
//!   shim's export is generated whole: guard, forward, record, log),
//!   `table` (an entry of a context's function tables, recorded as this
//!   verb: no exported symbol of its own), `event` (a data-path event of
//!   the trace: no function at all).
//! - Each argument's `Show` says how its word is shown; `_` records nothing
//!   of it. `; extra` words follow the arguments in the record and are
//!   shown as arguments (the export computes them: a QP's new state, the
//!   device of a closed context). A `(result_extra)` is the second word of
//!   a two-word result (`RcCq`, `RcEventType`, `DevList`).
//! - The symbol's version is its library's (`library(..)`): the default
//!   version of that name in the real library's ABI, read at build time.
//!
//! `called` lists functions of the real library the shim calls itself
//! without exporting them (a slot, no record).
//!
//! The table has a section per library (`library(..) verbs {..} called
//! {..}`); ids run on across sections. Ids 0-75 are the trace format's
//! version 4; a new verb takes the next id, so older files still decode.

/// The verbs of libibverbs: `ibverbs!(then)` expands to `then! { .. }`
/// with the table's entries, each read once here ([`__entries!`]) and
/// handed on as `[kind library id CONST Slot name [arg: CType => Show, ..]
/// [extra: Type => Show, ..] CReturn => Show [result_extra: Type]]`, in
/// `verbs [..]`, then the `called [[library Slot name [arg: CType, ..]
/// CReturn]..]`.
#[macro_export]
macro_rules! ibverbs {
    ($then:ident) => {
        $crate::__entries! {
            $then
            library(Ibverbs)
            verbs {
                0 GET_DEVICE_NAME GetDeviceName = export ibv_get_device_name(device: *mut ibv_device => Dev) -> *const c_char => Str;
                1 GET_DEVICE_GUID GetDeviceGuid = export ibv_get_device_guid(device: *mut ibv_device => Dev) -> u64 => Guid;
                2 GET_DEVICE_INDEX GetDeviceIndex = export ibv_get_device_index(device: *mut ibv_device => Dev) -> c_int => Int;
                3 OPEN_DEVICE OpenDevice = export ibv_open_device(device: *mut ibv_device => Dev) -> *mut ibv_context => Ptr;
                4 FREE_DEVICE_LIST FreeDeviceList = export ibv_free_device_list(list: *mut *mut ibv_device => Ptr) -> () => Void;
                5 ALLOC_PD AllocPd = export ibv_alloc_pd(context: *mut ibv_context => Ptr) -> *mut ibv_pd => Ptr;
                6 QUERY_DEVICE QueryDevice = export ibv_query_device(context: *mut ibv_context => Ptr, device_attr: *mut ibv_device_attr => Ptr) -> c_int => Rc;
                7 QUERY_PORT QueryPort = export ibv_query_port(context: *mut ibv_context => Ptr, port_num: u8 => Int, port_attr: *mut _compat_ibv_port_attr => Ptr) -> c_int => Rc;
                8 QUERY_GID QueryGid = export ibv_query_gid(context: *mut ibv_context => Ptr, port_num: u8 => Int, index: c_int => Int, gid: *mut ibv_gid => Ptr) -> c_int => Int;
                9 QUERY_PKEY QueryPkey = export ibv_query_pkey(context: *mut ibv_context => Ptr, port_num: u8 => Int, index: c_int => Int, pkey: *mut u16 => Ptr) -> c_int => Int;
                10 QUERY_QP QueryQp = export ibv_query_qp(qp: *mut ibv_qp => Ptr, attr: *mut ibv_qp_attr => Ptr, attr_mask: c_int => Hex, init_attr: *mut ibv_qp_init_attr => Ptr) -> c_int => Rc;
                11 MODIFY_SRQ ModifySrq = export ibv_modify_srq(srq: *mut ibv_srq => Ptr, srq_attr: *mut ibv_srq_attr => Ptr, srq_attr_mask: c_int => Hex) -> c_int => Rc;
                12 QUERY_SRQ QuerySrq = export ibv_query_srq(srq: *mut ibv_srq => Ptr, srq_attr: *mut ibv_srq_attr => Ptr) -> c_int => Rc;
                13 ACK_CQ_EVENTS AckCqEvents = export ibv_ack_cq_events(cq: *mut ibv_cq => Ptr, nevents: c_uint => Int) -> () => Void;
                14 CREATE_COMP_CHANNEL CreateCompChannel = export ibv_create_comp_channel(context: *mut ibv_context => Ptr) -> *mut ibv_comp_channel => Ptr;
                15 CREATE_CQ CreateCq = export ibv_create_cq(context: *mut ibv_context => Ptr, cqe: c_int => Int, cq_context: *mut c_void => Ptr, channel: *mut ibv_comp_channel => Ptr, comp_vector: c_int => Int) -> *mut ibv_cq => Ptr;
                16 RESIZE_CQ ResizeCq = export ibv_resize_cq(cq: *mut ibv_cq => Ptr, cqe: c_int => Int) -> c_int => Rc;
                17 CREATE_SRQ CreateSrq = export ibv_create_srq(pd: *mut ibv_pd => Ptr, srq_init_attr: *mut ibv_srq_init_attr => Ptr) -> *mut ibv_srq => Ptr;
                18 CREATE_AH CreateAh = export ibv_create_ah(pd: *mut ibv_pd => Ptr, attr: *mut ibv_ah_attr => Ptr) -> *mut ibv_ah => Ptr;
                19 IMPORT_DEVICE ImportDevice = export ibv_import_device(cmd_fd: c_int => Int) -> *mut ibv_context => Ptr;
                20 IMPORT_PD ImportPd = export ibv_import_pd(context: *mut ibv_context => Ptr, pd_handle: u32 => Int) -> *mut ibv_pd => Ptr;
                21 CREATE_AH_FROM_WC CreateAhFromWc = export ibv_create_ah_from_wc(pd: *mut ibv_pd => Ptr, wc: *mut ibv_wc => Ptr, grh: *mut ibv_grh => Ptr, port_num: u8 => Int) -> *mut ibv_ah => Ptr;
                22 REG_MR RegMr = export ibv_reg_mr(pd: *mut ibv_pd => Ptr, addr: *mut c_void => Ptr, length: usize => Uint, access: c_int => Hex) -> *mut ibv_mr => Mr;
                23 REG_MR_IOVA RegMrIova = export ibv_reg_mr_iova(pd: *mut ibv_pd => Ptr, addr: *mut c_void => Ptr, length: usize => Uint, iova: u64 => Hex, access: c_int => Hex) -> *mut ibv_mr => Mr;
                24 REG_MR_IOVA2 RegMrIova2 = export ibv_reg_mr_iova2(pd: *mut ibv_pd => Ptr, addr: *mut c_void => Ptr, length: usize => Uint, iova: u64 => Hex, access: u32 => Hex) -> *mut ibv_mr => Mr;
                25 REG_DMABUF_MR RegDmabufMr = export ibv_reg_dmabuf_mr(pd: *mut ibv_pd => Ptr, offset: u64 => Hex, length: usize => Uint, iova: u64 => Hex, fd: c_int => Int, access: c_int => Hex) -> *mut ibv_mr => Mr;
                26 CREATE_QP CreateQp = export ibv_create_qp(pd: *mut ibv_pd => Ptr, qp_init_attr: *mut ibv_qp_init_attr => Ptr) -> *mut ibv_qp => Qp;
                27 MODIFY_QP ModifyQp = export ibv_modify_qp(qp: *mut ibv_qp => Ptr, attr: *mut ibv_qp_attr => Ptr, attr_mask: c_int => Hex; qp_state: c_int => Int) -> c_int => Rc;
                28 CLOSE_DEVICE CloseDevice = export ibv_close_device(context: *mut ibv_context => Ptr; device: *mut ibv_device => OnDev) -> c_int => Int;
                29 IMPORT_MR ImportMr = export ibv_import_mr(pd: *mut ibv_pd => Ptr, mr_handle: u32 => Uint) -> *mut ibv_mr => Mr;
                // The data path's events, for `ibv-shim trace --per-qp`.
                30 POST_SEND_EVENT PostSendEvent = event post_send(qp_num: u32 => Hex, wr_id: u64 => Hex) -> () => Posted;
                31 POST_RECV_EVENT PostRecvEvent = event post_recv(qp_num: u32 => Hex, wr_id: u64 => Hex) -> () => Posted;
                32 COMPLETION_EVENT CompletionEvent = event completion(qp_num: u32 => Hex, wr_id: u64 => Hex, recv: bool => Int) -> c_int => Status;
                33 DEALLOC_PD DeallocPd = export ibv_dealloc_pd(pd: *mut ibv_pd => Ptr) -> c_int => Rc;
                34 DEREG_MR DeregMr = export ibv_dereg_mr(mr: *mut ibv_mr => Ptr) -> c_int => Rc;
                35 DESTROY_CQ DestroyCq = export ibv_destroy_cq(cq: *mut ibv_cq => Ptr) -> c_int => Rc;
                36 DESTROY_SRQ DestroySrq = export ibv_destroy_srq(srq: *mut ibv_srq => Ptr) -> c_int => Rc;
                37 DESTROY_QP DestroyQp = export ibv_destroy_qp(qp: *mut ibv_qp => Ptr) -> c_int => Rc;
                38 DESTROY_AH DestroyAh = export ibv_destroy_ah(ah: *mut ibv_ah => Ptr) -> c_int => Rc;
                39 DESTROY_COMP_CHANNEL DestroyCompChannel = export ibv_destroy_comp_channel(channel: *mut ibv_comp_channel => Ptr) -> c_int => Rc;
                40 UNIMPORT_PD UnimportPd = export ibv_unimport_pd(pd: *mut ibv_pd => Ptr) -> () => Void;
                41 UNIMPORT_MR UnimportMr = export ibv_unimport_mr(mr: *mut ibv_mr => Ptr) -> () => Void;
                42 GET_CQ_EVENT GetCqEvent = export ibv_get_cq_event(channel: *mut ibv_comp_channel => Ptr, cq: *mut *mut ibv_cq => _, cq_context: *mut *mut c_void => _) -> c_int => RcCq(event_cq: *mut ibv_cq);
                43 GET_ASYNC_EVENT GetAsyncEvent = export ibv_get_async_event(context: *mut ibv_context => Ptr, event: *mut ibv_async_event => Ptr) -> c_int => RcEventType(event_type: c_int);
                44 ACK_ASYNC_EVENT AckAsyncEvent = export ibv_ack_async_event(event: *mut ibv_async_event => Ptr) -> () => Void;
                45 FORK_INIT ForkInit = export ibv_fork_init() -> c_int => Rc;
                46 REREG_MR ReregMr = export ibv_rereg_mr(mr: *mut ibv_mr => Ptr, flags: c_int => Hex, pd: *mut ibv_pd => Ptr, addr: *mut c_void => Ptr, length: usize => Uint, access: c_int => Hex) -> c_int => Int;
                // A list's first six devices are shown in its result.
                47 GET_DEVICE_LIST GetDeviceList = export ibv_get_device_list(num_devices: *mut c_int => Ptr; d0: *mut ibv_device => ListDev, d1: *mut ibv_device => ListDev, d2: *mut ibv_device => ListDev, d3: *mut ibv_device => ListDev, d4: *mut ibv_device => ListDev, d5: *mut ibv_device => ListDev) -> *mut *mut ibv_device => DevList(count: usize);
                48 VERBS_OPEN_DEVICE VerbsOpenDevice = export verbs_open_device(device: *mut ibv_device => Dev, private_data: *mut c_void => Ptr) -> *mut ibv_context => Ptr;
                49 CREATE_QP_EX CreateQpEx = table ibv_create_qp_ex(context: *mut ibv_context => Ptr, qp_init_attr_ex: *mut ibv_qp_init_attr_ex => Ptr) -> *mut ibv_qp => Qp;
                50 BIND_MW BindMw = table ibv_bind_mw(qp: *mut ibv_qp => Ptr, mw: *mut ibv_mw => Ptr) -> c_int => Rc;
                51 ATTACH_MCAST AttachMcast = export ibv_attach_mcast(qp: *mut ibv_qp => Ptr, gid: *const ibv_gid => Ptr, lid: u16 => Hex) -> c_int => Rc;
                52 DETACH_MCAST DetachMcast = export ibv_detach_mcast(qp: *mut ibv_qp => Ptr, gid: *const ibv_gid => Ptr, lid: u16 => Hex) -> c_int => Rc;
                // The function tables' creates: the context, and the parent
                // (or the attributes) whose address is recorded.
                53 ALLOC_MW AllocMw = table ibv_alloc_mw(context: *mut ibv_context => Ptr, pd: usize => Ptr) -> *mut ibv_mw => Ptr;
                54 CREATE_COUNTERS CreateCounters = table ibv_create_counters(context: *mut ibv_context => Ptr, attr: usize => Ptr) -> *mut ibv_counters => Ptr;
                55 REG_DM_MR RegDmMr = table ibv_reg_dm_mr(context: *mut ibv_context => Ptr, pd: usize => Ptr) -> *mut ibv_mr => Ptr;
                56 ALLOC_DM AllocDm = table ibv_alloc_dm(context: *mut ibv_context => Ptr, attr: usize => Ptr) -> *mut ibv_dm => Ptr;
                57 CREATE_FLOW_ACTION_ESP CreateFlowActionEsp = table ibv_create_flow_action_esp(context: *mut ibv_context => Ptr, attr: usize => Ptr) -> *mut ibv_flow_action => Ptr;
                58 ALLOC_PARENT_DOMAIN AllocParentDomain = table ibv_alloc_parent_domain(context: *mut ibv_context => Ptr, pd: usize => Ptr) -> *mut ibv_pd => Ptr;
                59 ALLOC_TD AllocTd = table ibv_alloc_td(context: *mut ibv_context => Ptr, attr: usize => Ptr) -> *mut ibv_td => Ptr;
                60 CREATE_RWQ_IND_TABLE CreateRwqIndTable = table ibv_create_rwq_ind_table(context: *mut ibv_context => Ptr, attr: usize => Ptr) -> *mut ibv_rwq_ind_table => Ptr;
                61 CREATE_WQ CreateWq = table ibv_create_wq(context: *mut ibv_context => Ptr, pd: usize => Ptr) -> *mut ibv_wq => Ptr;
                62 CREATE_CQ_EX CreateCqEx = table ibv_create_cq_ex(context: *mut ibv_context => Ptr, channel: usize => Ptr) -> *mut ibv_cq_ex => Ptr;
                63 CREATE_FLOW CreateFlow = table ibv_create_flow(context: *mut ibv_context => Ptr, qp: usize => Ptr) -> *mut ibv_flow => Ptr;
                64 OPEN_QP OpenQp = table ibv_open_qp(context: *mut ibv_context => Ptr, xrcd: usize => Ptr) -> *mut ibv_qp => Ptr;
                65 CREATE_SRQ_EX CreateSrqEx = table ibv_create_srq_ex(context: *mut ibv_context => Ptr, pd: usize => Ptr) -> *mut ibv_srq => Ptr;
                66 OPEN_XRCD OpenXrcd = table ibv_open_xrcd(context: *mut ibv_context => Ptr, attr: usize => Ptr) -> *mut ibv_xrcd => Ptr;
                // The function tables' destroys.
                67 DEALLOC_MW DeallocMw = table ibv_dealloc_mw(mw: *mut ibv_mw => Ptr) -> c_int => Rc;
                68 DESTROY_COUNTERS DestroyCounters = table ibv_destroy_counters(counters: *mut ibv_counters => Ptr) -> c_int => Rc;
                69 FREE_DM FreeDm = table ibv_free_dm(dm: *mut ibv_dm => Ptr) -> c_int => Rc;
                70 DESTROY_FLOW_ACTION DestroyFlowAction = table ibv_destroy_flow_action(action: *mut ibv_flow_action => Ptr) -> c_int => Rc;
                71 DEALLOC_TD DeallocTd = table ibv_dealloc_td(td: *mut ibv_td => Ptr) -> c_int => Rc;
                72 DESTROY_RWQ_IND_TABLE DestroyRwqIndTable = table ibv_destroy_rwq_ind_table(rwq_ind_table: *mut ibv_rwq_ind_table => Ptr) -> c_int => Rc;
                73 DESTROY_WQ DestroyWq = table ibv_destroy_wq(wq: *mut ibv_wq => Ptr) -> c_int => Rc;
                74 CLOSE_XRCD CloseXrcd = table ibv_close_xrcd(xrcd: *mut ibv_xrcd => Ptr) -> c_int => Rc;
                75 DESTROY_FLOW DestroyFlow = table ibv_destroy_flow(flow: *mut ibv_flow => Ptr) -> c_int => Rc;
                76 GET_PKEY_INDEX GetPkeyIndex = forward ibv_get_pkey_index(context: *mut ibv_context => Ptr, port_num: u8 => Int, pkey: u16 => Hex) -> c_int => Int;
            }
            called {
                QpToQpEx = fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex;
            }
            // librdmacm (`librdmacm.so.1`, `RDMACM_1.x`): the connection
            // manager's objects (`export`: tracked by the shim's `cm`) and
            // the calls worth a record (`forward`); the rest (rsockets,
            // getters) are trampolines.
            library(Rdmacm)
            verbs {
                77 RDMA_CREATE_EVENT_CHANNEL RdmaCreateEventChannel = export rdma_create_event_channel() -> *mut rdma_event_channel => Ptr;
                78 RDMA_DESTROY_EVENT_CHANNEL RdmaDestroyEventChannel = export rdma_destroy_event_channel(channel: *mut rdma_event_channel => Ptr) -> () => Void;
                79 RDMA_CREATE_ID RdmaCreateId = export rdma_create_id(channel: *mut rdma_event_channel => Ptr, id: *mut *mut rdma_cm_id => _, context: *mut c_void => Ptr, ps: rdma_port_space => Hex; made: *mut rdma_cm_id => Ptr) -> c_int => Int;
                80 RDMA_DESTROY_ID RdmaDestroyId = export rdma_destroy_id(id: *mut rdma_cm_id => Ptr) -> c_int => Int;
                81 RDMA_GET_CM_EVENT RdmaGetCmEvent = export rdma_get_cm_event(channel: *mut rdma_event_channel => Ptr, event: *mut *mut rdma_cm_event => _; got: *mut rdma_cm_event => Ptr, cm_id: *mut rdma_cm_id => Ptr) -> c_int => RcEventType(event_type: c_int);
                82 RDMA_ACK_CM_EVENT RdmaAckCmEvent = export rdma_ack_cm_event(event: *mut rdma_cm_event => Ptr) -> c_int => Int;
                83 RDMA_CREATE_QP RdmaCreateQp = export rdma_create_qp(id: *mut rdma_cm_id => Ptr, pd: *mut ibv_pd => Ptr, qp_init_attr: *mut ibv_qp_init_attr => Ptr; qp: *mut ibv_qp => Ptr) -> c_int => Int;
                84 RDMA_CREATE_QP_EX RdmaCreateQpEx = export rdma_create_qp_ex(id: *mut rdma_cm_id => Ptr, qp_init_attr: *mut ibv_qp_init_attr_ex => Ptr; qp: *mut ibv_qp => Ptr) -> c_int => Int;
                85 RDMA_DESTROY_QP RdmaDestroyQp = export rdma_destroy_qp(id: *mut rdma_cm_id => Ptr) -> () => Void;
                86 RDMA_CREATE_EP RdmaCreateEp = export rdma_create_ep(id: *mut *mut rdma_cm_id => _, res: *mut rdma_addrinfo => Ptr, pd: *mut ibv_pd => Ptr, qp_init_attr: *mut ibv_qp_init_attr => Ptr; made: *mut rdma_cm_id => Ptr) -> c_int => Int;
                87 RDMA_DESTROY_EP RdmaDestroyEp = export rdma_destroy_ep(id: *mut rdma_cm_id => Ptr) -> () => Void;
                88 RDMA_GET_REQUEST RdmaGetRequest = export rdma_get_request(listen: *mut rdma_cm_id => Ptr, id: *mut *mut rdma_cm_id => _; made: *mut rdma_cm_id => Ptr) -> c_int => Int;
                89 RDMA_MIGRATE_ID RdmaMigrateId = export rdma_migrate_id(id: *mut rdma_cm_id => Ptr, channel: *mut rdma_event_channel => Ptr) -> c_int => Int;
                90 RDMA_LISTEN RdmaListen = export rdma_listen(id: *mut rdma_cm_id => Ptr, backlog: c_int => Int) -> c_int => Int;
                91 RDMA_CONNECT RdmaConnect = export rdma_connect(id: *mut rdma_cm_id => Ptr, conn_param: *mut rdma_conn_param => Ptr) -> c_int => Int;
                92 RDMA_ACCEPT RdmaAccept = export rdma_accept(id: *mut rdma_cm_id => Ptr, conn_param: *mut rdma_conn_param => Ptr) -> c_int => Int;
                93 RDMA_DISCONNECT RdmaDisconnect = export rdma_disconnect(id: *mut rdma_cm_id => Ptr) -> c_int => Int;
                94 RDMA_GETADDRINFO RdmaGetaddrinfo = export rdma_getaddrinfo(node: *const c_char => Ptr, service: *const c_char => Ptr, hints: *const rdma_addrinfo => Ptr, res: *mut *mut rdma_addrinfo => _; list: *mut rdma_addrinfo => Ptr) -> c_int => Int;
                95 RDMA_FREEADDRINFO RdmaFreeaddrinfo = export rdma_freeaddrinfo(res: *mut rdma_addrinfo => Ptr) -> () => Void;
                96 RDMA_GET_DEVICES RdmaGetDevices = export rdma_get_devices(num_devices: *mut c_int => Ptr) -> *mut *mut ibv_context => Ptr;
                97 RDMA_FREE_DEVICES RdmaFreeDevices = export rdma_free_devices(list: *mut *mut ibv_context => Ptr) -> () => Void;
                98 RDMA_BIND_ADDR RdmaBindAddr = forward rdma_bind_addr(id: *mut rdma_cm_id => Ptr, addr: *mut sockaddr => Ptr) -> c_int => Int;
                99 RDMA_RESOLVE_ADDR RdmaResolveAddr = forward rdma_resolve_addr(id: *mut rdma_cm_id => Ptr, src_addr: *mut sockaddr => Ptr, dst_addr: *mut sockaddr => Ptr, timeout_ms: c_int => Int) -> c_int => Int;
                100 RDMA_RESOLVE_ROUTE RdmaResolveRoute = forward rdma_resolve_route(id: *mut rdma_cm_id => Ptr, timeout_ms: c_int => Int) -> c_int => Int;
                101 RDMA_REJECT RdmaReject = forward rdma_reject(id: *mut rdma_cm_id => Ptr, private_data: *const c_void => Ptr, private_data_len: u8 => Uint) -> c_int => Int;
                102 RDMA_ESTABLISH RdmaEstablish = forward rdma_establish(id: *mut rdma_cm_id => Ptr) -> c_int => Int;
                103 RDMA_SET_OPTION RdmaSetOption = forward rdma_set_option(id: *mut rdma_cm_id => Ptr, level: c_int => Int, optname: c_int => Int, optval: *mut c_void => Ptr, optlen: usize => Uint) -> c_int => Int;
                104 RDMA_JOIN_MULTICAST RdmaJoinMulticast = forward rdma_join_multicast(id: *mut rdma_cm_id => Ptr, addr: *mut sockaddr => Ptr, context: *mut c_void => Ptr) -> c_int => Int;
                105 RDMA_LEAVE_MULTICAST RdmaLeaveMulticast = forward rdma_leave_multicast(id: *mut rdma_cm_id => Ptr, addr: *mut sockaddr => Ptr) -> c_int => Int;
                106 RDMA_NOTIFY RdmaNotify = forward rdma_notify(id: *mut rdma_cm_id => Ptr, event: c_int => Int) -> c_int => Int;
            }
            called {}
        }
    };
}

/// Reads a declaration table (the grammar of the module's comment) into
/// the bracketed entries [`ibverbs!`] hands on.
#[doc(hidden)]
#[macro_export]
macro_rules! __entries {
    (
        $then:ident
        $(
            library($lib:ident)
            verbs { $(
                $id:literal $konst:ident $slot:ident = $kind:ident $name:ident (
                    $($arg:ident: $t:ty => $show:tt),* $(; $($x:ident: $xt:ty => $xshow:ident),*)?
                ) -> $rt:ty => $res:ident $(($rx:ident: $rxt:ty))?;
            )* }
            called { $(
                $cslot:ident = fn $cname:ident($($ca:ident: $ct:ty),*) -> $crt:ty;
            )* }
        )+
    ) => {
        $then! {
            verbs [$($(
                [$kind $lib $id $konst $slot $name
                    [$($arg: $t => $show),*] [$($($x: $xt => $xshow),*)?] $rt => $res [$($rx: $rxt)?]]
            )*)+]
            called [$($([$lib $cslot $cname [$($ca: $ct),*] $crt])*)+]
        }
    };
}

/// A declared argument's `Show`, `None` for `_` (not recorded).
#[doc(hidden)]
#[macro_export]
macro_rules! __show {
    (_) => {
        ::core::option::Option::None
    };
    ($show:ident) => {
        ::core::option::Option::Some($crate::verbs::Show::$show)
    };
}

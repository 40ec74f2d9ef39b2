//! The connection manager's part of a report (`connection_manager`): what
//! the program made through librdmacm and never freed, beside the verbs
//! objects (a QP made by `rdma_create_qp` is a verbs object, named under
//! its id here by address), and the mistakes diagnosed at the calls.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::{Address, Created};

/// What a connection-manager object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CmKind {
    /// An `rdma_cm_id` never destroyed.
    CmId,
    /// An `rdma_event_channel` never destroyed (a file descriptor).
    EventChannel,
    /// An event fetched by `rdma_get_cm_event` and never acked.
    CmEvent,
    /// An `rdma_getaddrinfo` list never freed.
    Addrinfo,
    /// An `rdma_get_devices` list never freed.
    RdmaDeviceList,
}

impl CmKind {
    pub const ALL: [CmKind; 5] = [
        CmKind::CmId,
        CmKind::EventChannel,
        CmKind::CmEvent,
        CmKind::Addrinfo,
        CmKind::RdmaDeviceList,
    ];

    /// The kind's name in reports and the schema.
    pub const fn name(self) -> &'static str {
        match self {
            CmKind::CmId => "cm_id",
            CmKind::EventChannel => "event_channel",
            CmKind::CmEvent => "cm_event",
            CmKind::Addrinfo => "addrinfo",
            CmKind::RdmaDeviceList => "rdma_device_list",
        }
    }

    pub fn from_name(name: &str) -> Option<CmKind> {
        CmKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for CmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for CmKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for CmKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CmKind, D::Error> {
        const NAMES: [&str; 5] = [
            "cm_id",
            "event_channel",
            "cm_event",
            "addrinfo",
            "rdma_device_list",
        ];
        let name = Cow::<'de, str>::deserialize(d)?;
        CmKind::from_name(&name).ok_or_else(|| de::Error::unknown_variant(&name, &NAMES))
    }
}

/// One connection-manager object never freed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CmObject<'a> {
    pub kind: CmKind,
    pub handle: Address,
    /// An id's or event's channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Address>,
    /// An event's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Address>,
    /// The listener an incoming id came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener: Option<Address>,
    /// The QP `rdma_create_qp` / `rdma_create_ep` made for an id (a verbs
    /// object, listed with the verbs objects when it is left too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp: Option<Address>,
    /// The verbs objects still alive that belong with an id: what
    /// `rdma_create_qp` / `rdma_create_ep` made with its QP (CQs, their
    /// completion channels, an SRQ), its QP's PD and the MRs registered on
    /// that PD (where `rdma_reg_msgs`, `rdma_reg_read` and `rdma_reg_write`
    /// put memory). Each is also a verbs object, listed in `objects`.
    #[serde(borrow, default, skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<CmVerbs<'a>>,
    /// An id's port space (`TCP`, `UDP`, `IB`, `IPOIB`).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub port_space: Option<Cow<'a, str>>,
    /// An id's last state as seen (its last event, or `LISTENING`).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Cow<'a, str>>,
    /// An event's type (`ESTABLISHED`, ...).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Cow<'a, str>>,
    /// An event's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// A channel's file descriptor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd: Option<i32>,
    /// The call that made it (`rdma_create_id`, a `CONNECT_REQUEST`
    /// event, ...); for an event, where it was fetched.
    #[serde(borrow)]
    pub via: Cow<'a, str>,
    #[serde(borrow)]
    pub created: Created<'a>,
    /// Matched by a suppression rule (the user's, or a built-in one).
    #[serde(default)]
    pub suppressed: bool,
    /// The library that keeps it on purpose (a built-in suppression).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub kept_by: Option<Cow<'a, str>>,
}

/// A verbs object named under its cm_id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CmVerbs<'a> {
    /// `send_cq`, `recv_cq`, `send_cq_channel`, `recv_cq_channel`, `srq`
    /// (made by librdmacm for the id), `pd` (the QP's), `mr` (registered on
    /// that PD).
    #[serde(borrow)]
    pub role: Cow<'a, str>,
    pub handle: Address,
    /// The PD is shared with another listed id, whose entry names its MRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_with: Option<Address>,
}

/// A mistake diagnosed at a call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CmDiagnosis<'a> {
    /// `unacked-events`, `double-ack`, `id-before-qp`,
    /// `qp-destroyed-twice`, `disconnect-unconnected`.
    #[serde(borrow)]
    pub check: Cow<'a, str>,
    /// The log's WARN text.
    #[serde(borrow)]
    pub text: Cow<'a, str>,
}

/// The report's `connection_manager`: present when the program used
/// librdmacm through the shim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionManager<'a> {
    #[serde(borrow)]
    pub objects: Vec<CmObject<'a>>,
    #[serde(borrow, default)]
    pub diagnoses: Vec<CmDiagnosis<'a>>,
}

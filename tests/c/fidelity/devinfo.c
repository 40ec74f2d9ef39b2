/* The device's attributes as ibv_devinfo -v shows them (ibv_query_device,
 * ibv_query_device_ex, ibv_query_port on port 1, the GID types of the
 * first two entries), less GUIDs and addresses. */
#include "probe.h"

#define D(f) say_int(#f, (long long)a.orig_attr.f)
#define X(f) say_hex(#f, (unsigned long long)a.f)
#define P(f) say_int("port." #f, (long long)pa.f)

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_device_attr_ex a;
	memset(&a, 0, sizeof(a));
	NEED(ibv_query_device_ex(p.ctx, NULL, &a) == 0);
	say("fw_ver", a.orig_attr.fw_ver);
	say_hex("max_mr_size", a.orig_attr.max_mr_size);
	say_hex("page_size_cap", a.orig_attr.page_size_cap);
	say_hex("vendor_id", a.orig_attr.vendor_id);
	D(vendor_part_id); D(hw_ver);
	D(max_qp); D(max_qp_wr);
	say_hex("device_cap_flags", a.orig_attr.device_cap_flags);
	D(max_sge); D(max_sge_rd); D(max_cq); D(max_cqe); D(max_mr); D(max_pd);
	D(max_qp_rd_atom); D(max_ee_rd_atom); D(max_res_rd_atom); D(max_qp_init_rd_atom);
	D(max_ee_init_rd_atom); D(atomic_cap); D(max_ee); D(max_rdd); D(max_mw);
	D(max_raw_ipv6_qp); D(max_raw_ethy_qp); D(max_mcast_grp); D(max_mcast_qp_attach);
	D(max_total_mcast_qp_attach); D(max_ah); D(max_fmr); D(max_map_per_fmr);
	D(max_srq); D(max_srq_wr); D(max_srq_sge); D(max_pkeys); D(local_ca_ack_delay);
	D(phys_port_cnt);
	X(device_cap_flags_ex);
	X(completion_timestamp_mask);
	X(hca_core_clock);
	X(odp_caps.general_caps);
	X(odp_caps.per_transport_caps.rc_odp_caps);
	X(odp_caps.per_transport_caps.uc_odp_caps);
	X(odp_caps.per_transport_caps.ud_odp_caps);
	X(xrc_odp_caps);
	X(max_dm_size);
	X(max_wq_type_rq);
	X(raw_packet_caps);
	X(tso_caps.max_tso);
	X(rss_caps.max_rwq_indirection_tables);
	X(packet_pacing_caps.qp_rate_limit_max);
	X(tm_caps.max_num_tags);
	X(cq_mod_caps.max_cq_count);
	X(pci_atomic_caps.fetch_add);

	struct ibv_port_attr pa;
	NEED(ibv_query_port(p.ctx, 1, &pa) == 0);
	P(state); P(max_mtu); P(active_mtu); P(gid_tbl_len);
	say_hex("port.port_cap_flags", pa.port_cap_flags);
	say_hex("port.port_cap_flags2", pa.port_cap_flags2);
	say_hex("port.max_msg_sz", pa.max_msg_sz);
	P(bad_pkey_cntr); P(qkey_viol_cntr); P(pkey_tbl_len); P(lid); P(sm_lid); P(lmc);
	P(max_vl_num); P(sm_sl); P(subnet_timeout); P(init_type_reply); P(active_width);
	P(active_speed); P(phys_state); P(link_layer); P(flags);

	for (int i = 0; i < 2; i++) {
		char key[32];
		struct ibv_gid_entry e;
		snprintf(key, sizeof(key), "gid%d.type", i);
		if (ibv_query_gid_ex(p.ctx, 1, i, &e, 0) == 0)
			say_int(key, e.gid_type);
		else
			say(key, errno_name(errno));
	}
	union ibv_gid g;
	NEED(ibv_query_gid(p.ctx, 1, p.gid_index, &g) == 0);
	say("gid_at_index.ipv4_mapped",
	    g.raw[10] == 0xff && g.raw[11] == 0xff && !g.raw[0] && !g.raw[9] ? "yes" : "no");
	say("num_comp_vectors_is_cpus",
	    p.ctx->num_comp_vectors == sysconf(_SC_NPROCESSORS_CONF) ? "yes" : "no");
	uint16_t pkey;
	NEED(ibv_query_pkey(p.ctx, 1, 0, &pkey) == 0);
	say_hex("pkey0", pkey);
	probe_close(&p);
	return 0;
}

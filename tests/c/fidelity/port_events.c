/* Port async events: the device's Ethernet link taken down and brought
 * back up (`ip link`), the port's state while down and after, and the
 * events the context gets (port error, port active, GID table change).
 * The link is the netdev sysfs names for the probe's GID; where there is
 * none (a simulated device has no netdev), each line says so. */
#include "probe.h"

static void drain(struct probe *p, long ms, int counts[32])
{
	memset(counts, 0, 32 * sizeof(int));
	drain_events(p, ms, counts);
}

static const char *port_state(struct probe *p)
{
	static const char *const names[] = { "NOP", "DOWN", "INIT", "ARMED", "ACTIVE",
					     "ACTIVE_DEFER" };
	struct ibv_port_attr a;
	if (ibv_query_port(p->ctx, 1, &a))
		return "query failed";
	return (unsigned)a.state < 6 ? names[a.state] : "UNKNOWN";
}

/* Waits up to `ms` for the port to reach `want`. */
static const char *wait_state(struct probe *p, const char *want, long ms)
{
	long long end = now_ms() + ms;
	while (strcmp(port_state(p), want) != 0 && now_ms() < end)
		sleep_ms(20);
	return port_state(p);
}

static int link_set(const char *netdev, const char *how)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "ip link set dev %s %s", netdev, how);
	return system(cmd);
}

int main(void)
{
	static const char *const keys[] = { "down.state", "down.events.port_err",
					    "down.events.port_active", "up.state",
					    "up.events.port_active", "up.events.port_err" };
	struct probe p;
	probe_open(&p);
	say("initial_state", port_state(&p));
	char netdev[64] = "";
	char file[256];
	snprintf(file, sizeof(file), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d",
		 ibv_get_device_name(p.ctx->device), p.gid_index);
	FILE *f = fopen(file, "r");
	if (f) {
		if (!fgets(netdev, sizeof(netdev), f))
			netdev[0] = 0;
		fclose(f);
		netdev[strcspn(netdev, "\n")] = 0;
	}
	if (!netdev[0] || geteuid() != 0) {
		for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			say(keys[i], "no netdev");
		probe_close(&p);
		return 0;
	}
	int counts[32];
	drain(&p, 100, counts);
	NEED(link_set(netdev, "down") == 0);
	say("down.state", wait_state(&p, "DOWN", 5000));
	drain(&p, 500, counts);
	say("down.events.port_err", how_many(counts[IBV_EVENT_PORT_ERR]));
	say("down.events.port_active", how_many(counts[IBV_EVENT_PORT_ACTIVE]));
	NEED(link_set(netdev, "up") == 0);
	say("up.state", wait_state(&p, "ACTIVE", 10000));
	drain(&p, 500, counts);
	say("up.events.port_active", how_many(counts[IBV_EVENT_PORT_ACTIVE]));
	say("up.events.port_err", how_many(counts[IBV_EVENT_PORT_ERR]));
	/* The IPv4 GID the other probes use is back before this one ends. */
	union ibv_gid g;
	long long end = now_ms() + 10000;
	while ((ibv_query_gid(p.ctx, 1, p.gid_index, &g) || memcmp(&g, &p.gid, sizeof(g))) &&
	       now_ms() < end)
		sleep_ms(50);
	probe_close(&p);
	return 0;
}

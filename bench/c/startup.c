/* Figure 6: start-up. Calls ibv_get_device_list once (and frees the list),
 * nothing else; bench/c/spawn.c times whole runs of it. */
#include <infiniband/verbs.h>

int main(void)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list)
        ibv_free_device_list(list);
    return list ? 0 : 1;
}

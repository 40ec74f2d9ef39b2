/* ibv_reg_mr's rules that come from the kernel: an access bit in the
 * optional range it does not know (bit 29), write access to pages the
 * process cannot write, pages that are not mapped, a zero-length MR. */
#include <sys/mman.h>

#include "probe.h"

static void reg(struct probe *p, const char *key, void *addr, size_t len, int access)
{
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(p->pd, addr, len, access);
	if (mr) {
		say(key, "registered");
		NEED(ibv_dereg_mr(mr) == 0);
	} else {
		say(key, errno_name(errno));
	}
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	long page = sysconf(_SC_PAGESIZE);
	char *rw = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NEED(rw != MAP_FAILED);
	reg(&p, "optional_bit_29", rw, page, IBV_ACCESS_LOCAL_WRITE | (1 << 29));
	reg(&p, "zero_length", rw, 0, IBV_ACCESS_LOCAL_WRITE);
	NEED(mprotect(rw + page, page, PROT_READ) == 0);
	reg(&p, "read_only_page.no_write", rw + page, page, IBV_ACCESS_REMOTE_READ);
	reg(&p, "read_only_page.local_write", rw + page, page, IBV_ACCESS_LOCAL_WRITE);
	reg(&p, "read_only_page.remote_write", rw + page, page,
	    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	reg(&p, "partly_read_only.local_write", rw, 2 * page, IBV_ACCESS_LOCAL_WRITE);
	NEED(munmap(rw + 3 * page, page) == 0);
	reg(&p, "unmapped.no_write", rw + 3 * page, page, 0);
	reg(&p, "partly_unmapped.no_write", rw + 2 * page, 2 * page, 0);
	NEED(munmap(rw, 3 * page) == 0);
	probe_close(&p);
	return 0;
}

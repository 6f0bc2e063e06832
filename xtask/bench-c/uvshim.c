/*
 * uvshim.c: a stand-in kernel for rdma-core's libibverbs (measuring equipment for
 * `cargo xtask bench --host`, not product). Loaded with LD_PRELOAD under
 * `uverbs-count` (count.c), it lets Debian's rdma-core 44 (libibverbs + libefa or
 * librxe) open a device that does not exist, so callgrind can count rdma-core's
 * userspace instructions on the data path:
 *
 *  - device discovery: the netlink socket (NETLINK_RDMA) fails with EPROTONOSUPPORT, so
 *    libibverbs falls back to sysfs, and SYSFS_PATH (libibverbs/sysfs.c) points it at a
 *    fake sysfs this constructor writes: one uverbs0 whose ibdev is efa_0 (PCI modalias
 *    of an EFA device, 1d0f:efa0) or rxe0 (librxe matches the name), per UVSHIM_PROVIDER;
 *  - /dev/infiniband/uverbs0: stat and open are answered with /dev/null (a character
 *    device; its dev_t is the one the fake sysfs names, as libibverbs' open_cdev checks);
 *  - RDMA_VERBS_IOCTL on that fd fails with ENOTTY ("no ioctl framework"), so every
 *    command takes libibverbs' legacy write() path, which this file answers:
 *    GET_CONTEXT, QUERY_DEVICE(_EX), QUERY_PORT, ALLOC_PD, REG_MR, CREATE_AH,
 *    CREATE_CQ(_EX), CREATE_QP(_EX), MODIFY_QP(_EX), POST_SEND (librxe's doorbell) and,
 *    with an empty answer, everything else (destroys);
 *  - mmap of that fd: plain anonymous memory; rxe queues get the header the kernel
 *    writes (log2_elem_size, index_mask).
 *
 * count.c plays the device through uvshim_region(): it writes CQEs into the mapped
 * rings. The shim's answer to a write() is not counted (callgrind's
 * --toggle-collect=write, see write() below), but glibc's write wrapper is: the shim makes
 * the real write() on the fd (it is /dev/null), as rdma-core does against a device.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <rdma/efa-abi.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

#include "uvshim.h"

#define CDEV "/dev/infiniband/uverbs0"

static int uv_fd = -1;
static int is_efa;
static char sysfs_dir[64];
static struct uvshim_region regions[UVSHIM_MAX_REGIONS];
static int nregions;
static uint64_t next_key = 0x10000;
static uint32_t next_handle = 1;
static uint32_t next_qpn = 1;
static uint16_t next_cqn;

static void fatal(const char *what)
{
	fprintf(stderr, "uvshim: %s\n", what);
	_exit(3);
}

#define REAL(ret, name, ...)                                              \
	static ret (*real_##name)(__VA_ARGS__);                           \
	static void load_##name(void)                                     \
	{                                                                 \
		if (!real_##name)                                         \
			real_##name = dlsym(RTLD_NEXT, #name);            \
		if (!real_##name)                                         \
			fatal("dlsym(" #name ") failed");                 \
	}

REAL(int, open, const char *, int, ...)
REAL(int, open64, const char *, int, ...)
REAL(int, openat, int, const char *, int, ...)
REAL(int, stat, const char *, struct stat *)
REAL(int, stat64, const char *, struct stat64 *)
REAL(ssize_t, write, int, const void *, size_t)
REAL(int, socket, int, int, int)
REAL(void *, mmap, void *, size_t, int, int, int, off_t)
REAL(void *, mmap64, void *, size_t, int, int, int, off64_t)

/* What the constructor created, removed in reverse order by the destructor. */
static char created[32][256];
static int ncreated;

static void remember(const char *path)
{
	if (ncreated == 32)
		fatal("too many sysfs files");
	snprintf(created[ncreated++], sizeof(created[0]), "%s", path);
}

static void put_file(const char *rel, const char *text)
{
	char path[256];
	char *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", sysfs_dir, rel);
	/* mkdir -p of the parent */
	for (slash = strchr(path + strlen(sysfs_dir) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = 0;
		if (mkdir(path, 0755) == 0)
			remember(path);
		*slash = '/';
	}
	remember(path);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		fatal("writing the fake sysfs");
}

__attribute__((constructor)) static void uvshim_init(void)
{
	const char *p = getenv("UVSHIM_PROVIDER");
	const char *ibdev;
	char devno[32], rel[128];
	struct stat st;

	/* Only the driver gets a stand-in kernel; any other program that inherits
	 * LD_PRELOAD (valgrind's launcher, timeout, a shell) runs untouched. */
	load_write(); /* write() calls it without a test */
	if (strcmp(program_invocation_short_name, "uverbs-count"))
		return;
	if (!p || (strcmp(p, "efa") && strcmp(p, "rxe")))
		fatal("UVSHIM_PROVIDER must be efa or rxe");
	is_efa = !strcmp(p, "efa");
	ibdev = is_efa ? "efa_0" : "rxe0";
	strcpy(sysfs_dir, "/tmp/uvshim-sysfs.XXXXXX");
	if (!mkdtemp(sysfs_dir))
		fatal("mkdtemp");
	load_stat();
	if (real_stat("/dev/null", &st))
		fatal("stat /dev/null");
	snprintf(devno, sizeof(devno), "%u:%u\n", major(st.st_rdev), minor(st.st_rdev));
	put_file("class/infiniband_verbs/abi_version", "6\n");
	put_file("class/infiniband_verbs/uverbs0/dev", devno);
	put_file("class/infiniband_verbs/uverbs0/abi_version", "1\n");
	snprintf(rel, sizeof(rel), "%s\n", ibdev);
	put_file("class/infiniband_verbs/uverbs0/ibdev", rel);
	snprintf(rel, sizeof(rel), "class/infiniband/%s/node_type", ibdev);
	put_file(rel, "1: CA\n");
	if (is_efa) {
		snprintf(rel, sizeof(rel), "class/infiniband/%s/device/modalias", ibdev);
		put_file(rel, "pci:v00001D0Fd0000EFA0sv00001D0Fsd0000EFA0bc02sc00i00\n");
	}
	setenv("SYSFS_PATH", sysfs_dir, 1);
}

__attribute__((destructor)) static void uvshim_fini(void)
{
	/* Files and directories we made, newest first, then the mkdtemp directory. */
	while (ncreated > 0)
		remove(created[--ncreated]);
	if (sysfs_dir[0] && rmdir(sysfs_dir))
		fprintf(stderr, "uvshim: could not remove %s\n", sysfs_dir);
}

/* ----- the character device --------------------------------------------------------- */

static int open_cdev(void)
{
	load_open();
	uv_fd = real_open("/dev/null", O_RDWR | O_CLOEXEC);
	return uv_fd;
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	if (!strcmp(path, CDEV))
		return open_cdev();
	va_start(ap, flags);
	mode = va_arg(ap, mode_t);
	va_end(ap);
	load_open();
	return real_open(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	if (!strcmp(path, CDEV))
		return open_cdev();
	va_start(ap, flags);
	mode = va_arg(ap, mode_t);
	va_end(ap);
	load_open64();
	return real_open64(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	if (!strcmp(path, CDEV))
		return open_cdev();
	va_start(ap, flags);
	mode = va_arg(ap, mode_t);
	va_end(ap);
	load_openat();
	return real_openat(dirfd, path, flags, mode);
}

int stat(const char *path, struct stat *st)
{
	load_stat();
	return real_stat(!strcmp(path, CDEV) ? "/dev/null" : path, st);
}

int stat64(const char *path, struct stat64 *st)
{
	load_stat64();
	return real_stat64(!strcmp(path, CDEV) ? "/dev/null" : path, st);
}

int socket(int domain, int type, int protocol)
{
	if (domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	load_socket();
	return real_socket(domain, type, protocol);
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	if (fd == uv_fd && uv_fd >= 0) {
		/* No RDMA_VERBS_IOCTL: libibverbs takes the write() path. */
		errno = ENOTTY;
		return -1;
	}
	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	{
		static int (*real_ioctl)(int, unsigned long, void *);
		if (!real_ioctl)
			real_ioctl = dlsym(RTLD_NEXT, "ioctl");
		return real_ioctl(fd, req, arg);
	}
}

/* ----- mmap: plain memory ------------------------------------------------------------- */

static struct uvshim_region *new_region(enum uvshim_kind kind, size_t len)
{
	struct uvshim_region *r;

	if (nregions == UVSHIM_MAX_REGIONS)
		fatal("too many mmap regions");
	r = &regions[nregions++];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->key = next_key;
	r->len = (len + 4095) & ~(size_t)4095;
	next_key += r->len + 4096;
	return r;
}

const struct uvshim_region *uvshim_region(enum uvshim_kind kind, int nth)
{
	int i;

	for (i = 0; i < nregions; i++)
		if (regions[i].kind == kind && nth-- == 0)
			return &regions[i];
	return NULL;
}

static void *map_region(size_t len, off_t off)
{
	struct uvshim_region *r = NULL;
	void *p;
	int i;

	for (i = 0; i < nregions; i++)
		if ((uint64_t)off >= regions[i].key && (uint64_t)off < regions[i].key + regions[i].len)
			r = &regions[i];
	if (!r) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	load_mmap();
	p = real_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return p;
	if ((uint64_t)off == r->key) {
		r->addr = p;
		if (r->kind == UVSHIM_RXE_CQ || r->kind == UVSHIM_RXE_SQ || r->kind == UVSHIM_RXE_RQ) {
			struct rxe_queue_buf *q = p;
			q->log2_elem_size = r->log2_elem_size;
			q->index_mask = r->slots - 1;
		}
	}
	return p;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fd == uv_fd && uv_fd >= 0)
		return map_region(len, off);
	load_mmap();
	return real_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	if (fd == uv_fd && uv_fd >= 0)
		return map_region(len, off);
	load_mmap64();
	return real_mmap64(addr, len, prot, flags, fd, off);
}

/* ----- write(): the uverbs commands ----------------------------------------------------- */

static uint32_t pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static uint32_t log2u(uint32_t v)
{
	uint32_t l = 0;

	while ((1u << l) < v)
		l++;
	return l;
}

/* The queue the kernel's rxe_queue_init makes for `num_elem` elements of `elem_size`. */
static struct uvshim_region *rxe_queue(enum uvshim_kind kind, uint32_t num_elem, size_t elem_size,
				       struct mminfo *mi)
{
	uint32_t slots = pow2(num_elem + 1);
	uint32_t l2 = log2u((uint32_t)elem_size);
	struct uvshim_region *r = new_region(kind, sizeof(struct rxe_queue_buf) + ((size_t)slots << l2));

	r->slots = slots;
	r->log2_elem_size = l2;
	mi->offset = r->key;
	mi->size = (uint32_t)r->len;
	return r;
}

/* Answers one command; returns 0 or an errno. */
static int command(const void *buf, size_t len)
{
	const struct ib_uverbs_cmd_hdr *hdr = buf;
	const uint8_t *body = (const uint8_t *)buf + sizeof(*hdr);
	uint32_t cmd = hdr->command & IB_USER_VERBS_CMD_COMMAND_MASK;
	int ex = !!(hdr->command & IB_USER_VERBS_CMD_FLAG_EXTENDED);
	uint8_t *resp, *drv;
	size_t resp_len, drv_len;

	if (len < sizeof(*hdr))
		return EINVAL;
	if (ex) {
		const struct ib_uverbs_ex_cmd_hdr *xh = (const void *)body;
		resp = (uint8_t *)(uintptr_t)xh->response;
		resp_len = (size_t)hdr->out_words * 8;
		drv = resp + resp_len;
		drv_len = (size_t)xh->provider_out_words * 8;
		body += sizeof(*xh);
	} else {
		/* Every legacy command with a response starts with `response`. */
		resp = hdr->out_words ? (uint8_t *)(uintptr_t) * (const uint64_t *)body : NULL;
		resp_len = (size_t)hdr->out_words * 4;
		drv = NULL;
		drv_len = 0;
	}
	if (resp)
		memset(resp, 0, resp_len + drv_len);

	switch (cmd) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: {
		struct ib_uverbs_get_context_resp *r = (void *)resp;
		load_open();
		r->async_fd = real_open("/dev/null", O_RDONLY | O_CLOEXEC);
		r->num_comp_vectors = 1;
		if (is_efa) {
			struct efa_ibv_alloc_ucontext_resp *d = (void *)(resp + sizeof(*r));
			d->cmds_supp_udata_mask = EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE |
						  EFA_USER_CMDS_SUPP_UDATA_CREATE_AH;
			d->sub_cqs_per_cq = 2;
			d->inline_buf_size = 32;
			d->max_llq_size = 1u << 22;
			d->max_tx_batch = 8;
			d->min_sq_wr = 1;
		}
		return 0;
	}
	case IB_USER_VERBS_CMD_QUERY_DEVICE: { /* and IB_USER_VERBS_EX_CMD_QUERY_DEVICE */
		struct ib_uverbs_query_device_resp *r = (void *)resp;
		r->fw_ver = 1;
		r->max_mr_size = ~0ull;
		r->page_size_cap = 4096;
		r->vendor_id = is_efa ? 0x1d0f : 0xffffff;
		r->max_qp = 256;
		r->max_qp_wr = 8192;
		r->max_sge = 2;
		r->max_sge_rd = 1;
		r->max_cq = 256;
		r->max_cqe = 65536;
		r->max_mr = 256;
		r->max_pd = 256;
		r->max_ah = 256;
		r->max_pkeys = 1;
		r->phys_port_cnt = 1;
		if (ex) {
			struct ib_uverbs_ex_query_device_resp *x = (void *)resp;
			x->response_length = (uint32_t)(resp_len < sizeof(*x) ? resp_len : sizeof(*x));
			if (is_efa && drv_len >= sizeof(struct efa_ibv_ex_query_device_resp)) {
				struct efa_ibv_ex_query_device_resp *d = (void *)drv;
				d->max_sq_wr = 8192;
				d->max_rq_wr = 8192;
				d->max_sq_sge = 2;
				d->max_rq_sge = 2;
				d->max_rdma_size = 1u << 30;
			}
		}
		return 0;
	}
	case IB_USER_VERBS_CMD_QUERY_PORT: {
		struct ib_uverbs_query_port_resp *r = (void *)resp;
		r->state = 4; /* ACTIVE */
		r->max_mtu = r->active_mtu = 3;
		r->gid_tbl_len = 1;
		r->pkey_tbl_len = 1;
		r->max_msg_sz = 1u << 30;
		r->phys_state = 5;
		r->link_layer = is_efa ? 0 : 2; /* unspecified / Ethernet */
		return 0;
	}
	case IB_USER_VERBS_CMD_ALLOC_PD: {
		struct ib_uverbs_alloc_pd_resp *r = (void *)resp;
		r->pd_handle = next_handle++;
		if (is_efa) {
			struct efa_ibv_alloc_pd_resp *d = (void *)(resp + sizeof(*r));
			d->pdn = 1;
		}
		return 0;
	}
	case IB_USER_VERBS_CMD_REG_MR: {
		struct ib_uverbs_reg_mr_resp *r = (void *)resp;
		r->mr_handle = next_handle++;
		r->lkey = r->rkey = 0x100 + r->mr_handle;
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_AH: {
		struct ib_uverbs_create_ah_resp *r = (void *)resp;
		r->ah_handle = next_handle++;
		if (is_efa) {
			struct efa_ibv_create_ah_resp *d = (void *)(resp + sizeof(*r));
			d->efa_address_handle = 7;
		}
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_CQ: { /* and _EX_ */
		const struct ib_uverbs_create_cq *c = (const void *)body;
		struct ib_uverbs_create_cq_resp *r = (void *)resp;
		const struct ib_uverbs_ex_create_cq *cx = (const void *)body;
		uint32_t cqe = ex ? cx->cqe : c->cqe;
		uint8_t *d = ex ? drv : resp + sizeof(*r);
		struct uvshim_region *q;

		r->cq_handle = next_handle++;
		r->cqe = cqe;
		if (ex)
			((struct ib_uverbs_ex_create_cq_resp *)resp)->response_length =
				sizeof(struct ib_uverbs_ex_create_cq_resp);
		if (is_efa) {
			struct efa_ibv_create_cq_resp *e = (void *)d;
			/* efa_create_cq's request: num_sub_cqs, cq_entry_size. */
			const struct efa_ibv_create_cq *ec =
				(const void *)(body + (ex ? sizeof(*cx) : sizeof(*c)));
			q = new_region(UVSHIM_EFA_CQ, (size_t)cqe * ec->cq_entry_size * ec->num_sub_cqs);
			q->entries = cqe;
			q->entry_size = ec->cq_entry_size;
			q->sub_cqs = ec->num_sub_cqs;
			e->q_mmap_key = q->key;
			e->q_mmap_size = q->len;
			e->cq_idx = next_cqn++;
		} else {
			/* The kernel's user CQE is struct rxe_cqe (an ib_wc): 64 bytes, a power of two. */
			struct rxe_create_cq_resp *x = (void *)d;
			q = rxe_queue(UVSHIM_RXE_CQ, cqe, 64, &x->mi);
			q->entries = cqe;
		}
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_QP: { /* and _EX_ */
		const struct ib_uverbs_create_qp *c = (const void *)body;
		const struct ib_uverbs_ex_create_qp *cx = (const void *)body;
		struct ib_uverbs_create_qp_resp *r = (void *)resp;
		uint32_t swr = ex ? cx->max_send_wr : c->max_send_wr;
		uint32_t rwr = ex ? cx->max_recv_wr : c->max_recv_wr;
		uint32_t ssge = ex ? cx->max_send_sge : c->max_send_sge;
		uint32_t rsge = ex ? cx->max_recv_sge : c->max_recv_sge;
		uint32_t inl = ex ? cx->max_inline_data : c->max_inline_data;
		uint8_t *d = ex ? drv : resp + sizeof(*r);

		r->qp_handle = next_handle++;
		r->qpn = next_qpn++;
		r->max_send_wr = swr;
		r->max_recv_wr = rwr;
		r->max_send_sge = ssge;
		r->max_recv_sge = rsge;
		r->max_inline_data = inl;
		if (ex)
			((struct ib_uverbs_ex_create_qp_resp *)resp)->response_length =
				sizeof(struct ib_uverbs_ex_create_qp_resp);
		if (is_efa) {
			struct efa_ibv_create_qp_resp *e = (void *)d;
			const struct efa_ibv_create_qp *ec =
				(const void *)(body + (ex ? sizeof(*cx) : sizeof(*c)));
			struct uvshim_region *desc = new_region(UVSHIM_EFA_SQ_DESC, ec->sq_ring_size);
			struct uvshim_region *sdb = new_region(UVSHIM_EFA_DB, 4096);
			struct uvshim_region *rq = new_region(UVSHIM_EFA_RQ, ec->rq_ring_size ? ec->rq_ring_size : 16);
			struct uvshim_region *rdb = new_region(UVSHIM_EFA_DB, 4096);

			desc->qpn = rq->qpn = r->qpn;
			desc->entries = swr;
			e->llq_desc_mmap_key = desc->key;
			e->llq_desc_offset = 0;
			e->sq_db_mmap_key = sdb->key;
			e->sq_db_offset = 0;
			e->rq_mmap_key = rq->key;
			e->rq_mmap_size = rq->len;
			e->rq_db_mmap_key = rdb->key;
			e->rq_db_offset = 0;
			/* As the uverbs EFA device model does: sub-CQ = QP number mod sub-CQs. */
			e->send_sub_cq_idx = (uint16_t)(r->qpn % 2);
			e->recv_sub_cq_idx = (uint16_t)(r->qpn % 2);
			desc->sub_cq = e->send_sub_cq_idx;
		} else {
			struct rxe_create_qp_resp *x = (void *)d;
			/* rxe_qp_init_req: room for max(SGEs, inline) after the fixed WQE. */
			size_t sq_room = ssge * sizeof(struct rxe_sge) > inl ? ssge * sizeof(struct rxe_sge) : inl;
			size_t rq_room = rsge * sizeof(struct rxe_sge);
			struct uvshim_region *sq = rxe_queue(UVSHIM_RXE_SQ, swr,
							     pow2(sizeof(struct rxe_send_wqe) + sq_room), &x->sq_mi);
			struct uvshim_region *rq = rxe_queue(UVSHIM_RXE_RQ, rwr,
							     pow2(sizeof(struct rxe_recv_wqe) + rq_room), &x->rq_mi);
			sq->qpn = rq->qpn = r->qpn;
			sq->entries = swr;
		}
		return 0;
	}
	case IB_USER_VERBS_CMD_MODIFY_QP: /* and _EX_ */
		if (ex && resp)
			((struct ib_uverbs_ex_modify_qp_resp *)resp)->response_length =
				sizeof(struct ib_uverbs_ex_modify_qp_resp);
		return 0;
	case IB_USER_VERBS_CMD_POST_SEND: /* librxe's doorbell: wr_count 0 */
	default:
		/* MODIFY_QP, destroys, ...: success with a zeroed response. */
		return 0;
	}
}

/*
 * write() on the device: the kernel's side, not rdma-core's instructions. The measured
 * runs use `valgrind --tool=callgrind --toggle-collect=write`: entering this function
 * turns collection off, entering glibc's write() (called below, not tail-called) turns
 * it on again for glibc's wrapper, as against a real device, and the returns undo both.
 * Outside the measured loop collection is off, so the toggles turn it on for the
 * set-up's commands, which are the same for N and 2N and cancel out.
 */
__attribute__((optimize("no-optimize-sibling-calls"))) ssize_t write(int fd, const void *buf,
								     size_t len)
{
	ssize_t r;

	if (fd == uv_fd && uv_fd >= 0) {
		int err = command(buf, len);

		if (err) {
			errno = err;
			return -1;
		}
		/* The /dev/null fd: it answers `len`. */
	}
	r = real_write(fd, buf, len);
	return r;
}

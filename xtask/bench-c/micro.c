/*
 * micro.c: the libibverbs side of `uverbs perf micro` (measuring equipment for
 * `cargo xtask bench`, not product). Same measurements, same output lines:
 *
 *   micro poll_empty_ns <ns>          ibv_poll_cq(cq, 1, wc) on an empty CQ (best of 20 blocks)
 *   micro poll_per_cqe_ns <ns>        ibv_poll_cq(cq, 16, wc) with 1024 CQEs ready, per CQE
 *   micro poll_ex_per_cqe_ns <ns>     the same through ibv_start_poll/ibv_next_poll/ibv_end_poll,
 *                                     reading wr_id and status of each CQE
 *   micro post_one_ns <ns>            ibv_post_send of one RDMA WRITE, per call
 *   micro post_list32_per_wr_ns <ns>  ibv_post_send of a 32-WR list, per WR
 *   micro {cq,qp}_{anon,rss,vm}_bytes  growth per object of RssAnon (heap), VmRSS and
 *                                     VmSize over 128 CQs (128 entries, polled once) and
 *                                     then 128 RC QPs (128 send/recv WRs, 1 SGE), one per CQ
 *
 * One RC QP connected to a second QP of the same device; 8-byte RDMA WRITEs.
 * Usage: uverbs-bench-micro [-d DEV] [-x GID_INDEX] [-n ITERS]
 * Built on the host by xtask (gcc -O2 ... -libverbs) and copied into the VM.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define READY 1024
#define ROUND 64
#define LIST 32
#define BLOCKS 20
#define MEM_OBJECTS 128
#define MEM_DEPTH 128

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* RssAnon, VmRSS and VmSize of this process in bytes (/proc/self/status). */
static void mem_status(double out[3])
{
	static const char *keys[3] = { "RssAnon:", "VmRSS:", "VmSize:" };
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	int i, found = 0;

	if (!f)
		die("/proc/self/status");
	while (fgets(line, sizeof(line), f))
		for (i = 0; i < 3; i++)
			if (!strncmp(line, keys[i], strlen(keys[i]))) {
				out[i] = atof(line + strlen(keys[i])) * 1024.0;
				found++;
			}
	fclose(f);
	if (found != 3) {
		fprintf(stderr, "/proc/self/status lacks RssAnon/VmRSS/VmSize\n");
		exit(1);
	}
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct side {
	struct ibv_cq_ex *cqx; /* made by ibv_create_cq_ex, so both poll APIs work on it */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	void *buf;
};

static void make_side(struct ibv_context *ctx, struct ibv_pd *pd, struct side *s)
{
	struct ibv_qp_init_attr ia;
	struct ibv_cq_init_attr_ex cqa;
	struct ibv_qp_attr a;

	if (posix_memalign(&s->buf, 4096, 4096))
		die("posix_memalign");
	memset(s->buf, 0, 4096);
	s->mr = ibv_reg_mr(pd, s->buf, 4096,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!s->mr)
		die("ibv_reg_mr");
	memset(&cqa, 0, sizeof(cqa));
	cqa.cqe = READY;
	cqa.wc_flags = 0; /* wr_id and status, all the extended poll reads, need no flag */
	s->cqx = ibv_create_cq_ex(ctx, &cqa);
	if (!s->cqx)
		die("ibv_create_cq_ex");
	s->cq = ibv_cq_ex_to_cq(s->cqx);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = READY;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(pd, &ia);
	if (!s->qp)
		die("ibv_create_qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
}

static void connect_to(struct side *s, uint32_t dqpn, union ibv_gid *gid, int gidx, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

static void wait_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, &wc);
	} while (n == 0);
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "completion error: %s\n", n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
		exit(1);
	}
}

/*
 * Per-CQE time of draining READY completions, best of a few rounds; a round that meets an
 * empty poll is dropped and the next one waits twice as long. ex: one ibv_start_poll, then
 * ibv_next_poll to the end, reading wr_id and status of each; else ibv_poll_cq 16 at a time.
 */
/*
 * n polls of an empty CQ, in ns per poll (-1: the CQ was not empty). Four copies, each its own
 * function at its own code address (the volatile tag makes their code differ, so gcc's
 * identical-code folding keeps them apart): under TCG a loop whose code straddles a 4 KiB
 * page boundary cannot chain its translation blocks directly and runs 2-3x slower. The
 * caller takes the best copy; uverbs perf micro does the same.
 */
#define EMPTY_POLLS(k)                                                                  \
	static __attribute__((noinline)) double empty_polls_##k(struct ibv_cq *cq,      \
								 struct ibv_wc *wcs, int n) \
	{                                                                               \
		volatile int tag = k;                                                   \
		uint64_t t;                                                             \
		int i;                                                                  \
                                                                                        \
		(void)tag;                                                              \
		t = now_ns();                                                           \
		for (i = 0; i < n; i++)                                                 \
			if (ibv_poll_cq(cq, 1, wcs) != 0) {                             \
				fprintf(stderr, "the CQ was not empty\n");              \
				return -1;                                              \
			}                                                               \
		return (double)(now_ns() - t) / (n > 0 ? n : 1);                        \
	}
EMPTY_POLLS(0)
EMPTY_POLLS(1)
EMPTY_POLLS(2)
EMPTY_POLLS(3)

static double per_cqe_best(struct side *a, const struct ibv_send_wr *one, int ex)
{
	struct ibv_send_wr wrs[LIST], *bad;
	struct ibv_wc wcs[16];
	double best = 1e300;
	long settle_ms = 100;
	int r, i, k, clean = 0;
	uint64_t t;
	volatile uint64_t sink = 0;

	for (r = 0; r < 12 && clean < 4; r++) {
		int posted = 0, got = 0, empty_seen = 0;
		struct timespec ts;

		while (posted < READY) {
			k = READY - posted < LIST ? READY - posted : LIST;
			for (i = 0; i < k; i++) {
				wrs[i] = *one;
				wrs[i].send_flags = IBV_SEND_SIGNALED;
				wrs[i].next = i + 1 < k ? &wrs[i + 1] : NULL;
			}
			if (ibv_post_send(a->qp, wrs, &bad))
				die("ibv_post_send");
			posted += k;
		}
		ts.tv_sec = settle_ms / 1000;
		ts.tv_nsec = (settle_ms % 1000) * 1000000;
		nanosleep(&ts, NULL);
		t = now_ns();
		if (ex) {
			uint64_t ids = 0;

			while (got < READY) {
				struct ibv_poll_cq_attr pa = { 0 };
				int more = 1;

				if (ibv_start_poll(a->cqx, &pa)) {
					empty_seen = 1;
					break;
				}
				for (;;) {
					ids += a->cqx->wr_id;
					if (a->cqx->status != IBV_WC_SUCCESS)
						die("completion error");
					if (++got == READY)
						break;
					if (ibv_next_poll(a->cqx)) {
						more = 0;
						break;
					}
				}
				/*
				 * rdma-core's rxe before PRs #1512 and #1617 (v44, which the VM gets from
				 * the host) already stores the consumer index and unlocks when
				 * ibv_next_poll returns ENOENT, and an ibv_end_poll after that moves the
				 * consumer index one past the producer (the kernel then sees a full
				 * CQ). So ibv_end_poll follows only a poll that did not hit ENOENT; with
				 * the fixed rxe, build with -DRXE_CQ_EX_FIXED. The timed rounds read
				 * exactly READY CQEs and never take that path.
				 */
#ifndef RXE_CQ_EX_FIXED
				if (more)
#endif
					ibv_end_poll(a->cqx);
				(void)more;
			}
			sink = ids;
		} else {
			while (got < READY) {
				int n = ibv_poll_cq(a->cq, 16, wcs);
				if (n < 0)
					die("ibv_poll_cq");
				if (n == 0) {
					empty_seen = 1;
					break;
				}
				got += n;
			}
		}
		t = now_ns() - t;
		if (!empty_seen && got == READY) {
			double v = (double)t / READY;
			if (v < best)
				best = v;
			clean++;
			continue;
		}
		settle_ms *= 2;
		while (got < READY) {
			int n = ibv_poll_cq(a->cq, 16, wcs);
			if (n < 0)
				die("ibv_poll_cq");
			got += n;
		}
	}
	(void)sink;
	if (!clean) {
		fprintf(stderr, "the kernel never finished %d writes before the poll timing started\n", READY);
		exit(1);
	}
	return best;
}

int main(int argc, char **argv)
{
	const char *devname = NULL;
	int gidx = 1, iters = 10000, opt, i, r;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_port_attr port;
	struct side a, b;
	union ibv_gid gid;
	struct ibv_wc wcs[16];
	struct ibv_sge sge;
	struct ibv_send_wr wrs[LIST], one, *bad;
	uint64_t t, post_one = 0, post_list = 0;
	double empty, per_cqe, per_cqe_ex, mem_cq[3], mem_qp[3];
	int rounds;

	while ((opt = getopt(argc, argv, "d:x:n:")) != -1) {
		switch (opt) {
		case 'd': devname = optarg; break;
		case 'x': gidx = atoi(optarg); break;
		case 'n': iters = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-d DEV] [-x GID_INDEX] [-n ITERS]\n", argv[0]);
			return 2;
		}
	}
	if (iters < 100)
		iters = 100;
	list = ibv_get_device_list(NULL);
	if (!list || !list[0]) {
		fprintf(stderr, "no RDMA devices\n");
		return 1;
	}
	for (i = 0; list[i]; i++)
		if (!devname || !strcmp(ibv_get_device_name(list[i]), devname)) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, gidx, &gid))
		die("query port/gid");
	make_side(ctx, pd, &a);
	make_side(ctx, pd, &b);
	connect_to(&a, b.qp->qp_num, &gid, gidx, port.active_mtu);
	connect_to(&b, a.qp->qp_num, &gid, gidx, port.active_mtu);

	/* 1. Poll of an empty CQ: the best of BLOCKS blocks (a block that met an interrupt or a
	 * preemption does not show the cost of a poll), each timed in every copy of the loop
	 * (see EMPTY_POLLS). */
	empty = 1e300;
	for (r = 0; r < BLOCKS; r++) {
		int blk = iters / BLOCKS;
		double v[4];

		v[0] = empty_polls_0(a.cq, wcs, blk);
		v[1] = empty_polls_1(a.cq, wcs, blk);
		v[2] = empty_polls_2(a.cq, wcs, blk);
		v[3] = empty_polls_3(a.cq, wcs, blk);
		for (i = 0; i < 4; i++) {
			if (v[i] < 0)
				return 1;
			if (v[i] < empty)
				empty = v[i];
		}
	}

	sge.addr = (uintptr_t)a.buf;
	sge.length = 8;
	sge.lkey = a.mr->lkey;
	memset(&one, 0, sizeof(one));
	one.sg_list = &sge;
	one.num_sge = 1;
	one.opcode = IBV_WR_RDMA_WRITE;
	one.wr.rdma.remote_addr = (uintptr_t)b.buf;
	one.wr.rdma.rkey = b.mr->rkey;

	/* 2. Poll with READY CQEs waiting, per CQE: ibv_poll_cq, then the extended poll. */
	per_cqe = per_cqe_best(&a, &one, 0);
	per_cqe_ex = per_cqe_best(&a, &one, 1);

	/* 3./4. Posts of one WR and of 32-WR lists; only the posts are timed. */
	rounds = iters / ROUND < 4 ? 4 : iters / ROUND;
	for (r = 0; r < rounds; r++) {
		t = now_ns();
		for (i = 0; i < ROUND; i++) {
			struct ibv_send_wr w = one;
			w.send_flags = i + 1 == ROUND ? IBV_SEND_SIGNALED : 0;
			if (ibv_post_send(a.qp, &w, &bad))
				die("ibv_post_send");
		}
		post_one += now_ns() - t;
		wait_one(a.cq);
		for (i = 0; i < LIST; i++) {
			wrs[i] = one;
			wrs[i].send_flags = i + 1 == LIST ? IBV_SEND_SIGNALED : 0;
			wrs[i].next = i + 1 < LIST ? &wrs[i + 1] : NULL;
		}
		t = now_ns();
		for (i = 0; i < ROUND / LIST; i++)
			if (ibv_post_send(a.qp, wrs, &bad))
				die("ibv_post_send");
		post_list += now_ns() - t;
		for (i = 0; i < ROUND / LIST; i++)
			wait_one(a.cq);
	}
	/* 5. Memory per CQ and per QP. */
	{
		static struct ibv_cq *cqs[MEM_OBJECTS];
		static struct ibv_qp *qps[MEM_OBJECTS];
		double s0[3], s1[3], s2[3];
		struct ibv_qp_init_attr ia;

		mem_status(s0); /* once first, so stdio's buffer is not counted as growth */
		mem_status(s0);
		for (i = 0; i < MEM_OBJECTS; i++) {
			cqs[i] = ibv_create_cq(ctx, MEM_DEPTH, NULL, NULL, 0);
			if (!cqs[i])
				die("ibv_create_cq");
			if (ibv_poll_cq(cqs[i], 1, wcs) != 0)
				die("ibv_poll_cq");
		}
		mem_status(s1);
		for (i = 0; i < MEM_OBJECTS; i++) {
			memset(&ia, 0, sizeof(ia));
			ia.send_cq = cqs[i];
			ia.recv_cq = cqs[i];
			ia.qp_type = IBV_QPT_RC;
			ia.cap.max_send_wr = MEM_DEPTH;
			ia.cap.max_recv_wr = MEM_DEPTH;
			ia.cap.max_send_sge = 1;
			ia.cap.max_recv_sge = 1;
			qps[i] = ibv_create_qp(pd, &ia);
			if (!qps[i])
				die("ibv_create_qp");
		}
		mem_status(s2);
		for (i = 0; i < MEM_OBJECTS; i++)
			ibv_destroy_qp(qps[i]);
		for (i = 0; i < MEM_OBJECTS; i++)
			ibv_destroy_cq(cqs[i]);
		for (i = 0; i < 3; i++) {
			mem_cq[i] = (s1[i] - s0[i]) / MEM_OBJECTS;
			mem_qp[i] = (s2[i] - s1[i]) / MEM_OBJECTS;
		}
	}

	printf("micro poll_empty_ns %.1f\n", empty);
	printf("micro poll_per_cqe_ns %.1f\n", per_cqe);
	printf("micro poll_ex_per_cqe_ns %.1f\n", per_cqe_ex);
	printf("micro post_one_ns %.1f\n", (double)post_one / (rounds * ROUND));
	printf("micro post_list32_per_wr_ns %.1f\n", (double)post_list / (rounds * ROUND));
	printf("micro cq_anon_bytes %.1f\n", mem_cq[0]);
	printf("micro cq_rss_bytes %.1f\n", mem_cq[1]);
	printf("micro cq_vm_bytes %.1f\n", mem_cq[2]);
	printf("micro qp_anon_bytes %.1f\n", mem_qp[0]);
	printf("micro qp_rss_bytes %.1f\n", mem_qp[1]);
	printf("micro qp_vm_bytes %.1f\n", mem_qp[2]);

	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

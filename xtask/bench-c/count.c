/*
 * count.c: rdma-core's side of `cargo xtask bench --host` (measuring equipment, not
 * product). The same work as benches/ring_counts.rs, done by Debian's rdma-core 44
 * (libibverbs + libefa / librxe) against the stand-in kernel uvshim.c (LD_PRELOAD),
 * with this program playing the device: it writes the CQEs.
 *
 * Usage: UVSHIM_PROVIDER=efa|rxe LD_PRELOAD=uvshim.so valgrind --tool=callgrind \
 *          --collect-atstart=no --toggle-collect=write uverbs-count PHASE N
 * (the program must be named uverbs-count: the shim acts only in it).
 * PHASE: {efa,rxe}-{post,post-list,poll,poll-one,start-poll}, as in ring_counts.rs:
 *   post        N ibv_post_send calls of one WR;
 *   post-list   N WRs in ibv_post_send lists of 32;
 *   poll        2048 WRs posted and completed by "the device" (not counted), then N
 *               completions through ibv_poll_cq 16 at a time;
 *   poll-one    the same, ibv_poll_cq of 1 per call;
 *   start-poll  the same, ibv_start_poll, wr_id and status of each, ibv_next_poll to the
 *               N-th, ibv_end_poll.
 * Only the measured loop is counted: CALLGRIND_TOGGLE_COLLECT around it (set-up, the
 * device's CQE writes and teardown are outside). xtask runs N and 2N and takes the
 * difference over N.
 *
 * -DUVERBS_CAPI builds the same program for uverbs' C ABI (`cargo xtask capi --features
 * standin`): linked to uverbs' libibverbs.so.1 (and libefa.so.1) instead of rdma-core's,
 * run with UVERBS_CAPI_STANDIN=efa|rxe and no shim. Everything counted is the same source;
 * only the device's part differs: complete_all() has the stand-in do it
 * (uverbs_standin_complete, capi/src/standin.rs: the rxe stand-in kernel's complete_sends,
 * the EFA model's fabric.process()), and the EFA sends go to the model's peer device, whose
 * GID and QP number (a QP with POSTED receives posted) uverbs_standin_efa_peer gives.
 *
 * The work: EFA an SRD QP (efadv_create_qp_ex, driver type SRD), depth 4096, sq_sig_all,
 * a signaled SEND with one 64-byte SGE to an AH, CQs of 4096 with 2 sub-CQs, doorbell
 * batch 8 (max_tx_batch); rxe an RC QP, depth 4096, sq_sig_all, a signaled 8-byte RDMA
 * WRITE with one SGE, CQs of 4096 (ibv_create_cq_ex, so both poll APIs work on them).
 */
#define _GNU_SOURCE
#include <infiniband/efadv.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/callgrind.h>

#ifdef UVERBS_CAPI
/* The stand-in's hooks, exported by uverbs' libibverbs.so.1 built with the `standin`
 * feature (version node UVERBS_PRIVATE_STANDIN_1). */
int uverbs_standin_complete(uint32_t qp_num);
int uverbs_standin_efa_peer(uint32_t qkey, uint32_t depth, uint32_t recvs, uint8_t gid[16],
			    uint32_t *qpn);
/* efadv_* come from uverbs' libefa.so.1 when it is built; weak, so the rxe phases run on a
 * tree without it (the EFA phases then say so). */
#pragma weak efadv_create_cq
#pragma weak efadv_create_qp_ex
#else
#include <dlfcn.h>

#include "uvshim.h"
#endif

#define DEPTH 4096
#define POSTED 2048
#define LIST 32
#define QKEY 0x12345678

static void die(const char *what)
{
	fprintf(stderr, "uverbs-count: %s\n", what);
	exit(1);
}

#ifndef UVERBS_CAPI
/* The shim is LD_PRELOADed, not linked: reach it by name. */
static const struct uvshim_region *region(enum uvshim_kind kind, int nth)
{
	static const struct uvshim_region *(*f)(enum uvshim_kind, int);
	const struct uvshim_region *r;

	if (!f)
		f = (const struct uvshim_region *(*)(enum uvshim_kind, int))dlsym(RTLD_DEFAULT,
										  "uvshim_region");
	if (!f)
		die("uvshim_region not found: run with LD_PRELOAD=uvshim.so");
	r = f(kind, nth);
	if (!r || !r->addr)
		die("the stand-in kernel has no such mapped region");
	return r;
}
#endif

struct setup {
	int efa;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq_ex *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_sge sge;
	struct ibv_send_wr wr[LIST];
};

static struct ibv_cq_ex *make_cq(struct setup *s)
{
	struct ibv_cq_init_attr_ex a = { .cqe = DEPTH, .wc_flags = 0 };
	struct ibv_cq_ex *cq;

	if (s->efa) {
		struct efadv_cq_init_attr e = { 0 };
		cq = efadv_create_cq(s->ctx, &a, &e, sizeof(e));
	} else {
		cq = ibv_create_cq_ex(s->ctx, &a);
	}
	if (!cq)
		die("create CQ");
	return cq;
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	if (ibv_modify_qp(qp, a, mask))
		die("ibv_modify_qp");
}

static void setup(struct setup *s, int efa)
{
	struct ibv_device **list;
	struct ibv_qp_init_attr_ex qa = { 0 };
	struct ibv_qp_attr a;
	static char buf[4096] __attribute__((aligned(4096)));
	uint32_t peer_qpn;
	int n, i;

	memset(s, 0, sizeof(*s));
	s->efa = efa;
#ifdef UVERBS_CAPI
	if (efa && (!efadv_create_cq || !efadv_create_qp_ex))
		die("efadv_* not found: uverbs' libefa.so.1 is not built in this tree");
#endif
	list = ibv_get_device_list(&n);
	if (!list || n != 1)
		die("ibv_get_device_list: expected the stand-in device");
	s->ctx = ibv_open_device(list[0]);
	if (!s->ctx)
		die("ibv_open_device");
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		die("ibv_alloc_pd");
	s->mr = ibv_reg_mr(s->pd, buf, sizeof(buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr)
		die("ibv_reg_mr");
	s->scq = make_cq(s);
	s->rcq = make_cq(s);
	qa.send_cq = ibv_cq_ex_to_cq(s->scq);
	qa.recv_cq = ibv_cq_ex_to_cq(s->rcq);
	qa.cap.max_send_wr = DEPTH;
	qa.cap.max_recv_wr = DEPTH;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.sq_sig_all = 1;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = s->pd;
	if (efa) {
		struct efadv_qp_init_attr e = { .driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD };
		qa.qp_type = IBV_QPT_DRIVER;
		s->qp = efadv_create_qp_ex(s->ctx, &qa, &e, sizeof(e));
	} else {
		qa.qp_type = IBV_QPT_RC;
		s->qp = ibv_create_qp_ex(s->ctx, &qa);
	}
	if (!s->qp)
		die("create QP");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (efa) {
		a.qkey = QKEY;
		modify(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
		a.qp_state = IBV_QPS_RTR;
		modify(s->qp, &a, IBV_QP_STATE);
		a.qp_state = IBV_QPS_RTS;
		modify(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		modify(s->qp, &a,
		       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = s->qp->qp_num;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.hop_limit = 1;
		modify(s->qp, &a,
		       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		modify(s->qp, &a,
		       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	}

	/* rdma-core's side: the shim accepts any destination; the QP after ours. */
	peer_qpn = s->qp->qp_num + 1;
	s->sge.addr = (uintptr_t)buf;
	s->sge.lkey = s->mr->lkey;
	if (efa) {
		struct ibv_ah_attr ah = { .is_global = 1, .port_num = 1 };
#ifdef UVERBS_CAPI
		/* The model's peer device: its GID, and its QP with POSTED receives. */
		if (uverbs_standin_efa_peer(QKEY, DEPTH, POSTED, ah.grh.dgid.raw, &peer_qpn))
			die("uverbs_standin_efa_peer");
#else
		ah.grh.dgid.raw[15] = 2;
#endif
		s->ah = ibv_create_ah(s->pd, &ah);
		if (!s->ah)
			die("ibv_create_ah");
		s->sge.length = 64;
	} else {
		s->sge.length = 8;
	}
	for (i = 0; i < LIST; i++) {
		struct ibv_send_wr *w = &s->wr[i];
		w->wr_id = 1;
		w->sg_list = &s->sge;
		w->num_sge = 1;
		w->send_flags = IBV_SEND_SIGNALED;
		w->next = i + 1 < LIST ? &s->wr[i + 1] : NULL;
		if (efa) {
			w->opcode = IBV_WR_SEND;
			w->wr.ud.ah = s->ah;
			w->wr.ud.remote_qpn = peer_qpn;
			w->wr.ud.remote_qkey = QKEY;
		} else {
			w->opcode = IBV_WR_RDMA_WRITE;
			w->wr.rdma.remote_addr = (uintptr_t)buf + 2048;
			w->wr.rdma.rkey = s->mr->rkey;
		}
	}
}

/* Posts `POSTED` WRs (lists of 32) and completes them all as the device: CQEs with the
 * req_ids the WQEs carry (EFA, phase 1 in the QP's send sub-CQ) or as the rxe kernel
 * writes them, consuming the WQEs (rxe). Not counted. */
static void complete_all(struct setup *s)
{
	struct ibv_send_wr *bad;
	int i;

	for (i = 0; i < POSTED / LIST; i++)
		if (ibv_post_send(s->qp, &s->wr[0], &bad))
			die("ibv_post_send (set-up)");
#ifdef UVERBS_CAPI
	/* The stand-in plays the device: the rxe kernel consumes the WQEs and writes their
	 * CQEs; the EFA fabric moves the sends to the peer's receives and writes both sides'
	 * completions. */
	if (uverbs_standin_complete(s->qp->qp_num) != POSTED)
		die("uverbs_standin_complete: not every WR completed");
#else
	if (s->efa) {
		const struct uvshim_region *sq = region(UVSHIM_EFA_SQ_DESC, 0);
		const struct uvshim_region *cq = region(UVSHIM_EFA_CQ, 0);
		uint8_t *sub = (uint8_t *)cq->addr + (size_t)sq->sub_cq * cq->entries * cq->entry_size;

		if (sq->entries < POSTED || cq->entries < POSTED)
			die("rings too small");
		for (i = 0; i < POSTED; i++) {
			/* efa_io_tx_meta_desc.req_id; efa_io_cdesc_common */
			uint16_t req_id = *(uint16_t *)((uint8_t *)sq->addr + (size_t)i * 64);
			uint8_t *cqe = sub + (size_t)i * cq->entry_size;

			memset(cqe, 0, cq->entry_size);
			memcpy(cqe, &req_id, 2);
			cqe[2] = 0; /* status OK */
			memcpy(cqe + 4, &(uint16_t){ (uint16_t)sq->qpn }, 2);
			/* flags: phase 1, q_type EFA_IO_SEND_QUEUE (1) in bits 2:1; written last */
			atomic_thread_fence(memory_order_release);
			cqe[3] = 1 | (1 << 1);
		}
	} else {
		const struct uvshim_region *cq = region(UVSHIM_RXE_CQ, 0);
		const struct uvshim_region *sq = region(UVSHIM_RXE_SQ, 0);
		struct rxe_queue_buf *q = cq->addr;
		struct rxe_queue_buf *sqb = sq->addr;

		/* As the rxe kernel's completer does (make_send_cqe, rxe_cq_post): the whole
		 * element zeroed, then wr_id, status, opcode, byte_len (dma.length), qp_num;
		 * the CQ producer index published; the SQ consumer index advanced past the
		 * WQEs (queue_advance_consumer). testing/rxe-standin does the same for uverbs. */
		for (i = 0; i < POSTED; i++) {
			struct ib_uverbs_wc *wc =
				(void *)(q->data + ((size_t)(i & q->index_mask) << q->log2_elem_size));
			memset(wc, 0, (size_t)1 << q->log2_elem_size);
			wc->wr_id = 1;
			wc->status = IBV_WC_SUCCESS;
			wc->opcode = IBV_WC_RDMA_WRITE;
			wc->byte_len = s->sge.length;
			wc->qp_num = s->qp->qp_num;
		}
		atomic_store_explicit((_Atomic uint32_t *)&q->producer_index, POSTED,
				      memory_order_release);
		atomic_store_explicit((_Atomic uint32_t *)&sqb->consumer_index, POSTED,
				      memory_order_release);
	}
#endif
}

int main(int argc, char **argv)
{
	struct setup s;
	struct ibv_send_wr *bad;
	const char *phase;
	unsigned long n, got = 0, i;
	int efa;

	if (argc != 3) {
		fprintf(stderr, "usage: uverbs-count {efa,rxe}-{post,post-list,poll,poll-one,start-poll} N\n");
		return 2;
	}
	n = strtoul(argv[2], NULL, 10);
	if (n > POSTED || n % LIST)
		die("N must be a multiple of 32, at most 2048");
	if (!strncmp(argv[1], "efa-", 4))
		efa = 1;
	else if (!strncmp(argv[1], "rxe-", 4))
		efa = 0;
	else
		die("PHASE starts with efa- or rxe-");
	phase = argv[1] + 4;
#ifdef UVERBS_CAPI
#define PROVIDER_ENV "UVERBS_CAPI_STANDIN"
#else
#define PROVIDER_ENV "UVSHIM_PROVIDER"
#endif
	if (!getenv(PROVIDER_ENV) || strcmp(getenv(PROVIDER_ENV), efa ? "efa" : "rxe"))
		die(PROVIDER_ENV " must name the PHASE's provider");
	setup(&s, efa);

	if (!strcmp(phase, "post")) {
		s.wr[0].next = NULL;
		CALLGRIND_TOGGLE_COLLECT;
		for (i = 0; i < n; i++)
			if (ibv_post_send(s.qp, &s.wr[0], &bad))
				die("ibv_post_send");
		CALLGRIND_TOGGLE_COLLECT;
	} else if (!strcmp(phase, "post-list")) {
		CALLGRIND_TOGGLE_COLLECT;
		for (i = 0; i < n / LIST; i++)
			if (ibv_post_send(s.qp, &s.wr[0], &bad))
				die("ibv_post_send");
		CALLGRIND_TOGGLE_COLLECT;
	} else if (!strcmp(phase, "poll") || !strcmp(phase, "poll-one")) {
		struct ibv_cq *cq = ibv_cq_ex_to_cq(s.scq);
		int per_call = !strcmp(phase, "poll") ? 16 : 1;
		struct ibv_wc wc[16];
		int bad_status = 0;

		complete_all(&s);
		CALLGRIND_TOGGLE_COLLECT;
		while (got < n) {
			int k = ibv_poll_cq(cq, per_call, wc);
			if (k != per_call)
				die("ibv_poll_cq: completions missing");
			got += (unsigned long)k;
		}
		CALLGRIND_TOGGLE_COLLECT;
		for (i = 0; i < (unsigned long)per_call; i++)
			bad_status |= wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != 1;
		if (bad_status)
			die("ibv_poll_cq: a completion is not the posted one");
	} else if (!strcmp(phase, "start-poll")) {
		struct ibv_poll_cq_attr pa = { 0 };
		uint64_t sum = 0;
		unsigned long nbad = 0;

		complete_all(&s);
		CALLGRIND_TOGGLE_COLLECT;
		if (n > 0) {
			if (ibv_start_poll(s.scq, &pa))
				die("ibv_start_poll: completions missing");
			for (;;) {
				sum += s.scq->wr_id;
				nbad += s.scq->status != IBV_WC_SUCCESS;
				if (++got == n)
					break;
				if (ibv_next_poll(s.scq))
					die("ibv_next_poll: completions missing");
			}
			ibv_end_poll(s.scq);
		}
		CALLGRIND_TOGGLE_COLLECT;
		/* Every WR was posted with wr_id 1 and completed successfully. */
		if (sum != n || nbad)
			die("extended poll: a completion is not the posted one");
	} else {
		die("unknown PHASE");
	}
	printf("uverbs-count %s %lu done\n", argv[1], n);
	return 0;
}

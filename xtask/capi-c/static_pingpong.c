/*
 * An RC exchange between two QPs of one device, written against rdma-core's <infiniband/verbs.h>
 * and linked statically against uverbs' libibverbs.a (`cargo xtask capi-vm`): an RDMA WRITE of
 * a pattern from A into B's buffer, then a SEND from B to A of what B received; both buffers
 * are checked.
 *
 * usage: static_pingpong DEVICE GID_INDEX
 * exit status: 0 the data arrived intact; 1 a verb failed; 2 the data was wrong.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 4096

static int fail(const char *what)
{
	perror(what);
	return 1;
}

static int poll_one(struct ibv_cq *cq, uint64_t want, const char *what)
{
	struct ibv_wc wc;
	long spins = 0;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
		if (++spins > 200000000L) {
			fprintf(stderr, "%s: no completion\n", what);
			return 1;
		}
	}
	if (n < 0) {
		fprintf(stderr, "%s: ibv_poll_cq failed\n", what);
		return 1;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != want) {
		fprintf(stderr, "%s: completion status %s (%d), wr_id %llu\n", what,
			ibv_wc_status_str(wc.status), wc.status, (unsigned long long)wc.wr_id);
		return 1;
	}
	return 0;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest_qpn, union ibv_gid *gid, int gid_index)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return fail("ibv_modify_qp INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return fail("ibv_modify_qp RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return fail("ibv_modify_qp RTS");
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_qp_init_attr qia;
	struct ibv_sge sge;
	struct ibv_send_wr swr, *bad_swr;
	struct ibv_recv_wr rwr, *bad_rwr;
	union ibv_gid gid;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ma, *mb;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	char *a, *b;
	int i, n, gid_index;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX\n", argv[0]);
		return 1;
	}
	gid_index = atoi(argv[2]);
	list = ibv_get_device_list(&n);
	if (!list)
		return fail("ibv_get_device_list");
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "device %s not found or not opened (%d devices listed)\n", argv[1], n);
		return 1;
	}
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		return fail("ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return fail("ibv_alloc_pd");
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		return fail("ibv_create_cq");
	a = calloc(1, SIZE);
	b = calloc(1, SIZE);
	if (!a || !b)
		return fail("calloc");
	ma = ibv_reg_mr(pd, a, SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mb = ibv_reg_mr(pd, b, SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ma || !mb)
		return fail("ibv_reg_mr");
	memset(&qia, 0, sizeof(qia));
	qia.send_cq = cq;
	qia.recv_cq = cq;
	qia.qp_type = IBV_QPT_RC;
	qia.cap.max_send_wr = 4;
	qia.cap.max_recv_wr = 4;
	qia.cap.max_send_sge = 1;
	qia.cap.max_recv_sge = 1;
	qa = ibv_create_qp(pd, &qia);
	qb = ibv_create_qp(pd, &qia);
	if (!qa || !qb)
		return fail("ibv_create_qp");
	if (connect_qp(qa, qb->qp_num, &gid, gid_index) || connect_qp(qb, qa->qp_num, &gid, gid_index))
		return 1;

	/* A writes a pattern into B's buffer. */
	for (i = 0; i < SIZE; i++)
		a[i] = (char)(i * 7 + 3);
	sge.addr = (uintptr_t)a;
	sge.length = SIZE;
	sge.lkey = ma->lkey;
	memset(&swr, 0, sizeof(swr));
	swr.wr_id = 1;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_RDMA_WRITE;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.wr.rdma.remote_addr = (uintptr_t)b;
	swr.wr.rdma.rkey = mb->rkey;
	if (ibv_post_send(qa, &swr, &bad_swr))
		return fail("ibv_post_send RDMA WRITE");
	if (poll_one(cq, 1, "RDMA WRITE"))
		return 1;
	if (memcmp(a, b, SIZE)) {
		fprintf(stderr, "RDMA WRITE: B's buffer differs from A's\n");
		return 2;
	}

	/* B sends what it received back into A's (cleared) buffer. */
	memset(a, 0, SIZE);
	sge.addr = (uintptr_t)a;
	sge.lkey = ma->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 2;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(qa, &rwr, &bad_rwr))
		return fail("ibv_post_recv");
	struct ibv_sge sb = { .addr = (uintptr_t)b, .length = SIZE, .lkey = mb->lkey };
	memset(&swr, 0, sizeof(swr));
	swr.wr_id = 3;
	swr.sg_list = &sb;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(qb, &swr, &bad_swr))
		return fail("ibv_post_send SEND");
	/* The send and the receive complete on the shared CQ in either order. */
	for (n = 0; n < 2; n++) {
		struct ibv_wc wc;
		long spins = 0;
		int got;

		while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
			if (++spins > 200000000L) {
				fprintf(stderr, "SEND/RECV: no completion\n");
				return 1;
			}
		if (got < 0 || wc.status != IBV_WC_SUCCESS || (wc.wr_id != 2 && wc.wr_id != 3)) {
			fprintf(stderr, "SEND/RECV: poll %d, status %d, wr_id %llu\n", got, wc.status,
				(unsigned long long)wc.wr_id);
			return 1;
		}
		if (wc.wr_id == 2 && wc.byte_len != SIZE) {
			fprintf(stderr, "RECV: byte_len %u, want %d\n", wc.byte_len, SIZE);
			return 2;
		}
	}
	for (i = 0; i < SIZE; i++)
		if (a[i] != (char)(i * 7 + 3)) {
			fprintf(stderr, "SEND: byte %d is %d, want %d\n", i, a[i], (char)(i * 7 + 3));
			return 2;
		}
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("static_pingpong: RDMA WRITE and SEND/RECV of %d bytes on %s intact\n", SIZE, argv[1]);
	return 0;
}

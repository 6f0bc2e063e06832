/*
 * uvshim.h: what the stand-in kernel (uvshim.c) tells the driver (count.c) about the
 * memory it handed out, so the driver can play the device. Measuring equipment.
 */
#ifndef UVSHIM_H
#define UVSHIM_H

#include <stddef.h>
#include <stdint.h>

#define UVSHIM_MAX_REGIONS 64

enum uvshim_kind {
	UVSHIM_EFA_CQ = 1, /* sub_cqs x entries CQEs of entry_size bytes */
	UVSHIM_EFA_SQ_DESC, /* the LLQ descriptor ring: entries 64-byte WQEs */
	UVSHIM_EFA_RQ,
	UVSHIM_EFA_DB,
	UVSHIM_RXE_CQ, /* struct rxe_queue_buf + slots << log2_elem_size */
	UVSHIM_RXE_SQ,
	UVSHIM_RXE_RQ,
};

struct uvshim_region {
	enum uvshim_kind kind;
	uint64_t key; /* the mmap offset */
	size_t len;
	void *addr; /* where the provider mapped it (NULL before) */
	uint32_t entries, entry_size, sub_cqs; /* EFA CQ; entries also SQs */
	uint32_t slots, log2_elem_size; /* rxe queues */
	uint32_t qpn; /* queues of a QP */
	uint32_t sub_cq; /* EFA SQ: its send sub-CQ */
};

/* The nth region of a kind, in creation order; NULL if there is none. */
const struct uvshim_region *uvshim_region(enum uvshim_kind kind, int nth);

#endif

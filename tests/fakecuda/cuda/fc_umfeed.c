/* SPDX-License-Identifier: MIT */
/* fakecuda unified-memory record feed — a bounded ring of the SIMULATED
 * device's GPU page faults, CPU faults and migrations, recorded only while
 * the CUPTI stand-in (libcupti.so.13) has UM counters enabled. Oldest
 * records are dropped on overflow and counted. */
#include "fc_internal.h"

#define FC_FEED_CAP 65536u

static struct fakecuda_um_record fc_ring[FC_FEED_CAP];
static size_t fc_head, fc_len;     /* oldest at fc_head */
static uint64_t fc_dropped;
static int fc_feed_on;

void fc_feed_push(uint32_t kind, uint32_t flags, uint64_t addr, uint64_t value,
		  uint64_t dur_ns, uint32_t src, uint32_t dst)
{
	if (!fc_feed_on)
		return;
	uint64_t now = fc_now_ns();
	if (fc_len == FC_FEED_CAP) {
		fc_head = (fc_head + 1) % FC_FEED_CAP;
		fc_len--;
		fc_dropped++;
	}
	fc_ring[(fc_head + fc_len++) % FC_FEED_CAP] = (struct fakecuda_um_record){
		.counter_kind = kind, .flags = flags, .address = addr,
		.value = value, .start_ns = now - dur_ns, .end_ns = now,
		.src_id = src, .dst_id = dst,
	};
}

FC_EXPORT int fakecuda_um_feed_enable(int on)
{
	fc_lock();
	int was = fc_feed_on;
	fc_feed_on = on != 0;
	if (!on) {
		fc_head = fc_len = 0;
	}
	fc_unlock();
	return was;
}

FC_EXPORT size_t fakecuda_um_feed_read(struct fakecuda_um_record *out, size_t max,
				       uint64_t *dropped)
{
	size_t n = 0;
	fc_lock();
	if (!out) {                         /* a probe: how many wait */
		n = fc_len;
		fc_unlock();
		return n;
	}
	while (n < max && fc_len) {
		out[n++] = fc_ring[fc_head];
		fc_head = (fc_head + 1) % FC_FEED_CAP;
		fc_len--;
	}
	if (dropped) {
		*dropped = fc_dropped;
		fc_dropped = 0;
	}
	fc_unlock();
	return n;
}

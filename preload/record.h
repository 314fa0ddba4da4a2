/* SPDX-License-Identifier: MIT */
/* The glue every hook uses: record an allocation, a free or another event
 * into the registry and the trace. Runs inside hooks (no malloc, no stdio).
 * Callers hold the hook guard (kvt_hook_enter) around these calls. */
#ifndef KVT_RECORD_H
#define KVT_RECORD_H

#include <stdint.h>

#include "kvtier/api.h"
#include "kvtier/trace_format.h"
#include "../profiler/registry.h"
#include "../profiler/trace.h"      /* kvt_rec_event(), kvt_attribute_api() */

extern struct kvt_registry *kvt_mem_reg;   /* address ranges */
extern struct kvt_registry *kvt_vmm_reg;   /* cuMemCreate handles */
extern struct kvt_registry *kvt_host_reg;  /* cuMemHostRegister'ed ranges */

struct kvt_place;

/* An allocation call returned `result`; addr/size valid when ok != 0.
 * Registers it (kind, aux = flags/handle, where it was placed: pl, NULL =
 * native) and writes one ALLOC event. */
void kvt_rec_alloc(struct kvt_registry *reg, uint8_t kind, uint16_t api,
		   int ok, uint64_t addr, uint64_t size, uint64_t aux, int32_t result);
void kvt_rec_alloc_placed(struct kvt_registry *reg, uint8_t kind, uint16_t api,
			  int ok, uint64_t addr, uint64_t size, uint64_t aux,
			  int32_t result, const struct kvt_place *pl);

/* Before a release call: take the record out (so a concurrent allocation
 * reusing the address is never confused with it). 0 when it was tracked. */
int kvt_rec_free_begin(struct kvt_registry *reg, uint64_t addr, struct kvt_alloc *out);
/* After the release call: on failure the record goes back; one FREE event;
 * the policy engine hears of the free. */
void kvt_rec_free_end(struct kvt_registry *reg, uint8_t kind, uint16_t api,
		      int tracked, const struct kvt_alloc *rec, uint64_t addr,
		      int ok, int32_t result);

/* Whether addr lies in device memory the application allocated (native
 * cuMemAlloc* and cudaMalloc*, stream-ordered, VMM mappings of device
 * handles): memory host code cannot read on a discrete GPU. One registry
 * lookup (two for a VMM mapping); no malloc. */
int kvt_rec_device_memory(uint64_t addr);

#endif

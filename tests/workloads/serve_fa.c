/* SPDX-License-Identifier: MIT */
/* serve-like personas: the FlashAttention kernels and the KV write kernel
 * that vLLM (V1 FlashAttention, V2) and SGLang (FA3 backend) launch, as
 * the stand-in's workload-defined kernels. The attention kernel takes ONE
 * parameter, a params struct by value:
 *   FA2 (vLLM's fork, Flash_fwd_params, csrc/flash_attn/src/flash.h at
 *   vllm-project/flash-attention 27f264b): 528 bytes; q/k/v pointers at
 *   0/8/16, their strides after them, cu_seqlens_q at 224, seqused_k at
 *   240, block_table at 344, its batch stride at 368, page_block_size at
 *   384 (offsets from the field list at natural alignment).
 *   FA3 (one CUTLASS Params struct): modelled, not byte-exact: 1024 bytes,
 *   four 128-byte TMA descriptors first, then the K/V pointers, strides,
 *   page table and lengths past byte 512 (offsets below).
 * Test infrastructure. */
#include <string.h>

#include "serve.h"

enum {
	FA2_BYTES = 528, FA2_Q = 0, FA2_K = 8, FA2_V = 16, FA2_K_BATCH = 32, FA2_K_ROW = 56,
	FA2_B = 176, FA2_CU_Q = 224, FA2_SEQUSED = 240, FA2_TABLE = 344, FA2_TABLE_STRIDE = 368,
	FA2_PAGE = 384, FA2_BF16 = 448,
};
enum {
	FA3_BYTES = 1024, FA3_K = 512, FA3_V = 520, FA3_K_PAGE = 528, FA3_K_ROW = 536,
	FA3_TABLE = 600, FA3_TABLE_STRIDE = 608, FA3_PAGE = 616, FA3_SEQUSED = 624,
	FA3_CU_Q = 632, FA3_B = 640,
};

struct sv_fa_layout {
	unsigned bytes, k, v, k_page, k_row, table, table_stride, page, seqused, cu_q, b;
};

static const struct sv_fa_layout sv_fa2 = {
	FA2_BYTES, FA2_K, FA2_V, FA2_K_BATCH, FA2_K_ROW, FA2_TABLE, FA2_TABLE_STRIDE, FA2_PAGE,
	FA2_SEQUSED, FA2_CU_Q, FA2_B,
};
static const struct sv_fa_layout sv_fa3 = {
	FA3_BYTES, FA3_K, FA3_V, FA3_K_PAGE, FA3_K_ROW, FA3_TABLE, FA3_TABLE_STRIDE, FA3_PAGE,
	FA3_SEQUSED, FA3_CU_Q, FA3_B,
};

static uint64_t sv_get(const unsigned char *s, unsigned off, unsigned size)
{
	uint64_t x = 0;
	memcpy(&x, s + off, size);
	return x;
}

static void sv_put(unsigned char *s, unsigned off, uint64_t x, unsigned size)
{
	memcpy(s + off, &x, size);
}

/* Every sequence's K and V rows [0, seqused_k) through its table row: the
 * rows written this step (by the cache-write kernel before it) are read
 * back with the rest. */
static int sv_fa_body(struct sv *v, const struct sv_fa_layout *l, const unsigned char *s)
{
	uintptr_t k = sv_get(s, l->k, 8), vv = sv_get(s, l->v, 8);
	uintptr_t table = sv_get(s, l->table, 8), used = sv_get(s, l->seqused, 8);
	uint64_t page_el = sv_get(s, l->k_page, 8), row_el = sv_get(s, l->k_row, 8);
	uint64_t tstride = sv_get(s, l->table_stride, 8);
	unsigned b = (unsigned)sv_get(s, l->b, 4), page = (unsigned)sv_get(s, l->page, 4);
	uint64_t row = row_el * 2;                        /* bf16 */
	if (!page || page_el != row_el * page || !table || !used)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < b; i++) {
		int32_t len;
		int r = v->kread((const int32_t *)used + i, &len, sizeof len);
		if (r)
			return r;
		if (len <= 0)
			continue;
		uint64_t nb = ((uint64_t)len + page - 1) / page;
		if (nb > tstride)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		int32_t *ids = sv_scratch(v, (size_t)nb);
		r = v->kread((const int32_t *)table + i * tstride, ids, (size_t)nb * sizeof *ids);
		if (!r && k)
			r = sv_kv_rows(v, k, ids, page, row, (uint32_t)len, (uint32_t)len);
		if (!r && vv)
			r = sv_kv_rows(v, vv, ids, page, row, (uint32_t)len, (uint32_t)len);
		if (r)
			return r;
	}
	return 0;
}

static int sv_fa2_body(void *const *args, void *ctx)
{
	return sv_fa_body(ctx, &sv_fa2, args[0]);
}

static int sv_fa3_body(void *const *args, void *ctx)
{
	return sv_fa_body(ctx, &sv_fa3, args[0]);
}

static CUfunction sv_fa_fn[2];

void sv_fa_launch(struct sv *v, int fa3, const struct sv_fa_args *a)
{
	const struct sv_fa_layout *l = fa3 ? &sv_fa3 : &sv_fa2;
	if (!sv_fa_fn[fa3]) {
		struct fakecuda_param p = { l->bytes, fa3 ? 16 : 8 };
		sv_fa_fn[fa3] = fa3
			? sv_define(v, "_ZN7cutlass13device_kernelIN5flash27FlashAttnFwdSm90E"
				    "EEvNT_6ParamsE", &p, 1, sv_fa3_body)
			: sv_define(v, "_Z24flash_fwd_splitkv_kernelI23Flash_fwd_kernel_traits"
				    "ILi128ELi64ELi128ELi4EEEEv16Flash_fwd_params", &p, 1,
				    sv_fa2_body);
	}
	_Alignas(64) unsigned char s[FA3_BYTES];
	memset(s, 0, sizeof s);
	sv_put(s, l->k, a->k, 8);
	sv_put(s, l->v, a->v, 8);
	sv_put(s, l->k_page, a->page_el, 8);
	sv_put(s, l->k_row, a->row_el, 8);
	sv_put(s, l->table, a->table, 8);
	sv_put(s, l->table_stride, a->table_stride, 8);
	sv_put(s, l->page, a->page, 4);
	sv_put(s, l->seqused, a->seqused_k, 8);
	sv_put(s, l->cu_q, a->cu_seqlens_q, 8);
	sv_put(s, l->b, a->b, 4);
	if (!fa3) {
		sv_put(s, FA2_Q, a->q, 8);
		sv_put(s, FA2_BF16, 1, 1);
	}
	void *args[] = { s };
	sv_launch(v, sv_fa_fn[fa3], args);
}

/* ---- the KV write: vLLM's reshape_and_cache_flash, SGLang's store ---- */

/* New K and V rows go to the slots in slot_mapping (int64, one per token;
 * negative: a padded token, skipped): slot s is row s % page of block
 * s / page. Its grid has one block per token (the count it reads). */
static int sv_cache_body(void *const *args, void *ctx)
{
	struct sv *v = ctx;
	uintptr_t k = *(const uint64_t *)args[2], vv = *(const uint64_t *)args[3];
	const int64_t *slots = *(const int64_t *const *)args[4];
	int64_t page_el = *(const int64_t *)args[5], row_el = *(const int64_t *)args[6];
	int page = *(const int *)args[12];
	unsigned grid[3];
	v->kgrid(grid);
	if (page <= 0 || page_el != row_el * page)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t row = (uint64_t)row_el * 2;
	int64_t *s = (int64_t *)sv_scratch(v, (size_t)grid[0] * 2);
	int r = v->kread(slots, s, grid[0] * sizeof *s);
	for (int t = 0; t < 2 && !r; t++) {
		uintptr_t base = t ? vv : k, run = 0;
		size_t run_len = 0;
		for (unsigned i = 0; i < grid[0] && !r; i++) {
			if (s[i] < 0)
				continue;
			uintptr_t at = base + (uint64_t)s[i] * row;
			if (run_len && run + run_len == at) {
				run_len += row;
				continue;
			}
			if (run_len)
				r = v->kaccess((const void *)run, run_len, 1);
			run = at;
			run_len = row;
		}
		if (!r && run_len)
			r = v->kaccess((const void *)run, run_len, 1);
	}
	return r;
}

void sv_cache_write(struct sv *v, const char *name, CUdeviceptr k, CUdeviceptr vv,
		    CUdeviceptr slots, unsigned ntok, unsigned page)
{
	static CUfunction fn[4];
	static const char *names[4];
	int i = 0;
	while (i < 4 && names[i] && strcmp(names[i], name))
		i++;
	if (i == 4)
		wl_die("too many cache-write kernels");
	if (!names[i]) {
		/* key, value, key_cache, value_cache, slot_mapping, block_stride,
		 * page_stride, head_stride, key_stride, value_stride, num_heads,
		 * head_size, block_size, k_scale, v_scale */
		static const struct fakecuda_param p[] = {
			{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 }, { 8, 8 },
			{ 8, 8 }, { 8, 8 }, { 8, 8 }, { 4, 4 }, { 4, 4 }, { 4, 4 }, { 8, 8 },
			{ 8, 8 },
		};
		fn[i] = sv_define(v, name, p, 15, sv_cache_body);
		names[i] = name;
	}
	if (!ntok)
		return;
	uint64_t zero = 0, row_el = v->o.row_bytes / 2, page_el = row_el * page;
	int heads = 1, head_size = (int)row_el, bs = (int)page;
	void *args[] = { &zero, &zero, &k, &vv, &slots, &page_el, &row_el, &row_el, &row_el,
			 &row_el, &heads, &head_size, &bs, &zero, &zero };
	sv_launch_grid(v, fn[i], ntok, args);
}

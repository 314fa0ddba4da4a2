/* SPDX-License-Identifier: MIT */
/* Between the three placement files (not for hooks: they use place.h).
 * Calls run one way, top to bottom: place.c decides and calls down into
 * place_act.c (what is done to memory) and place_account.c (what is
 * counted); place_act.c counts through place_account.c; place_account.c
 * calls neither. Inside hooks: no malloc, no locks here. */
#ifndef KVT_PLACE_INT_H
#define KVT_PLACE_INT_H

#include <stdint.h>

#include <cuda.h>

struct kvt_topo_choice;

/* place_act.c: home managed memory [d, d+size) on far node `node` (a plain
 * host home where the driver keeps none), mapped for the current device
 * unless fault admission is on. 1 when mapped for the GPU, 0 when not. */
int kvt_place_home_far(CUdeviceptr d, uint64_t size, int node);

/* place_account.c: the far nodes topology chose (once, at init); the first
 * (-1: none); the one for the next `size` bytes (spread by weight); bytes
 * now on a node (+/-). */
void kvt_place_far_init(const struct kvt_topo_choice *ch);
int kvt_place_far_first(void);
int kvt_place_pick_far(uint64_t size);
void kvt_place_account_far(int node, int64_t bytes);
/* Counts (atomic adds), and their reset in a fork child. */
void kvt_place_count_placed(uint8_t placement, uint64_t bytes);
void kvt_place_count_rehomed(void);
/* A live allocation of `bytes` changed placement (a provisional one re-homed
 * far): the live figures per placement follow it. */
void kvt_place_count_moved(uint8_t from, uint8_t to, uint64_t bytes);
void kvt_place_count_mismatch(void);
void kvt_place_counters_reset(void);
/* Every field of kvt_place_counters but `placing`, which place.c adds. */
struct kvt_place_counters;
void kvt_place_account_counters(struct kvt_place_counters *out);

#endif

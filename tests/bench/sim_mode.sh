# SPDX-License-Identifier: MIT
# Sourced by bench_serve.sh and bench_sim.sh: sim_mode NAME MODE sets up
# the simulated device for MODE. vtime: FAKECUDA_VTIME=1, and NORAND (the
# workloads' prefix) runs them without address randomisation; paced: the
# serial device, NORAND empty. Exits 2 on a bad MODE or without setarch.
sim_mode() {
	case $2 in
	vtime) export FAKECUDA_VTIME=1; unset FAKECUDA_PACE
	       NORAND="setarch $(uname -m) -R"
	       $NORAND true 2>/dev/null || { echo "$1: setarch -R is needed (util-linux)" >&2; exit 2; } ;;
	paced) unset FAKECUDA_VTIME; NORAND="" ;;
	*) echo "$1: mode '$2': vtime or paced" >&2; exit 2 ;;
	esac
}

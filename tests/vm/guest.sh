#!/bin/sh
# SPDX-License-Identifier: MIT
# Guest-side checks of make test-vm (busybox sh, run by /init).
#   guest.sh numa   machine (a): node 1 CPU-less with HMAT numbers
#   guest.sh cxl    machine (b): a CXL type-3 pmem device made system-ram
# Judges placement and sysfs facts only, never timings. One "PASS name: ..."
# or "FAIL name: ..." line per check (vm_check prints its own); exit 0 iff
# none failed.
K=/opt/kvtier
N=/sys/devices/system/node
POLICY_PROBE='host => pinned:cxl; mmap,size>=16M => bind:cxl; * => native'
POLICY_CHECK='host => pinned:cxl; device,size>=2M => managed:cxl; mmap,size>=16M => bind:cxl; * => native'
failed=0
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
check() {   # check NAME DETAIL CONDITION...
	n=$1 d=$2
	shift 2
	if "$@"; then pass "$n" "$d"; else fail "$n" "$d"; fi
}
rd() { cat "$1" 2>/dev/null || echo "?"; }
up() { cut -d" " -f1 /proc/uptime; }

# ---- the node facts from sysfs -------------------------------------------
cpuless_node() {   # NAME NODE
	c=$(rd $N/node$2/cpulist)
	mt=$(awk '/MemTotal/{print $4}' $N/node$2/meminfo 2>/dev/null)
	check "$1" "node $2 online, cpulist='$c', MemTotal ${mt:-?} kB" \
		[ -d $N/node$2 -a -z "$c" -a "${mt:-0}" -gt 0 ]
}

# node N's JSON object from kvtier topo --json (up to its first '{' inside)
topo_node() { grep -o "{\"node\":$1,[^{}]*\({[^{}]*}\)\{0,1\}" /tmp/topo.json; }

topo() {   # topo FAR_NODE REASON
	echo "--- kvtier topo [$(up)s]"
	$K/kvtier topo > /tmp/topo.txt 2>&1
	rc=$?
	cat /tmp/topo.txt
	$K/kvtier topo --json > /tmp/topo.json 2>/tmp/topo.err
	check topo_runs "kvtier topo rc=$rc, --json rc=$?" [ $rc = 0 -a -s /tmp/topo.json ]
	far=$(grep -o '"far":{"reason":"[a-z]*","nodes":\[[0-9,]*\]' /tmp/topo.json)
	check topo_far "$far (want reason $2, nodes [$1])" \
		[ "$far" = "\"far\":{\"reason\":\"$2\",\"nodes\":[$1]" ]
	line=$(grep '^far tier:' /tmp/topo.txt)
	check topo_far_text "'$line'" grep -q "^far tier: node $1 " /tmp/topo.txt
}

# ---- placement under the preload -------------------------------------------
placement() {   # placement FAR_NODE MIB [noprobe]
	if [ "$3" != noprobe ]; then
		echo "--- place_probe under LD_PRELOAD, KVTIER_POLICY='$POLICY_PROBE' [$(up)s]"
		LD_PRELOAD=$K/libkvtier.so LD_LIBRARY_PATH=$K/fakecuda KVTIER_POLICY="$POLICY_PROBE" \
			KVTIER_MIGRATE=0 $K/tests/place_probe > /tmp/probe.out 2>&1
		rc=$?
		cat /tmp/probe.out
		h=$(grep '^host ' /tmp/probe.out)
		m=$(grep '^mmap ' /tmp/probe.out)
		check probe_host "rc=$rc '$h'" grep -q "^host rc=0 numa=prefer:$1 freehost=0" /tmp/probe.out
		check probe_mmap "'$m'" grep -q "^mmap numa=prefer:$1\$" /tmp/probe.out
	fi

	echo "--- vm_check $1 0 $2 under kvtier run, KVTIER_POLICY='$POLICY_CHECK' [$(up)s]"
	LD_LIBRARY_PATH=$K/fakecuda KVTIER_POLICY="$POLICY_CHECK" KVTIER_MIGRATE=0 \
		$K/kvtier run --quiet --trace /tmp/vm_check.%p.trace -- $K/tests/vm_check "$1" 0 "$2"
	rc=$?
	check vm_check "vm_check exit $rc" [ $rc = 0 ]
}

# ---- llama.cpp from its npm package (machine b, when the initramfs has it) ---
# Natively, then under kvtier run with a rule binding maps of 16 MiB or more
# made from llama.cpp's libraries (node's own heap stays native) to the far
# tier: the greedy tokens must be the same, the KV's map (a
# posix_memalign block of 32 MiB, which kvtier's heap wrapper sees) must be
# bound to the far node with its pages there, and the trace must say so.
LLAMA_RULE='mmap,size>=16M,site~libggml* => bind:cxl; * => native'
# 1 024 cells: a KV of 32 MiB, the least the heap wrapper takes; few tokens,
# as the emulated CXL window costs about 0.6 s per MiB under TCG
LLAMA_CTX=1024 LLAMA_TOKENS=4
# a "numa: size=B <numa_maps line>" line: policy names NODE, pages only there
kv_on_node() {   # kv_on_node LINE NODE
	echo "$1" | awk -v n="$2" '{
		ok = $4 ~ ("^(prefer|bind):" n "$")
		for (i = 5; i <= NF; i++) if ($i ~ /^N[0-9]+=/ && $i !~ ("^N" n "=")) ok = 0
		exit !ok }'
}

llamacpp() {   # llamacpp FAR_NODE
	R=$K/real
	if [ ! -x /usr/bin/node ] || [ ! -d $R/node_modules ]; then
		echo "SKIP llamacpp: node or the npm packages are not in this initramfs"
		return
	fi
	echo "--- llama.cpp (npm package) natively [$(up)s]"
	(cd $R && node llamacpp_npm.mjs tiny.gguf $LLAMA_CTX $LLAMA_TOKENS) > /tmp/ll.native 2>&1
	rc=$?
	check llamacpp_native "node exit $rc, $(grep '^tokens:' /tmp/ll.native)" [ $rc = 0 ]
	[ $rc = 0 ] || tail -5 /tmp/ll.native
	echo "--- llama.cpp under kvtier run, KVTIER_POLICY='$LLAMA_RULE' [$(up)s]"
	(cd $R && KVTIER_POLICY="$LLAMA_RULE" KVTIER_MIGRATE=0 \
		$K/kvtier run --quiet --trace /tmp/ll.%p.trace -- node llamacpp_npm.mjs tiny.gguf $LLAMA_CTX $LLAMA_TOKENS) \
		> /tmp/ll.kvtier 2>&1
	rc=$?
	check llamacpp_kvtier "kvtier run exit $rc" [ $rc = 0 ]
	[ $rc = 0 ] || tail -5 /tmp/ll.kvtier
	nt=$(grep '^tokens:' /tmp/ll.native) kt=$(grep '^tokens:' /tmp/ll.kvtier)
	check llamacpp_tokens "same greedy tokens natively and under kvtier: ${kt#tokens: }" \
		[ -n "$nt" -a "$nt" = "$kt" ]
	kv=$(sed -n 's/^kv_bytes: //p' /tmp/ll.kvtier)
	pid=$(sed -n 's/^pid: //p' /tmp/ll.kvtier)
	# the map holding the KV: at least kv_bytes, with at least that many pages
	line=$(awk -v kv="${kv:-0}" '$1 == "numa:" {
		n = 0; for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=/) { split($i, a, "="); n += a[2] }
		if (n * 4096 >= kv) { print; exit } }' /tmp/ll.kvtier)
	check llamacpp_kv_far "KV of $((${kv:-0} >> 20)) MiB: '$line'" kv_on_node "$line" "$1"
	$K/kvtier dump /tmp/ll.$pid.trace > /tmp/ll.dump 2>&1
	ev=$(grep -m1 'api=posix_memalign kind=mmap' /tmp/ll.dump | grep -o 'place=[^ ]* .*size=[0-9]*')
	check llamacpp_trace "trace: $ev" sh -c "echo '$ev' | grep -q '^place=bind:far .*size=$kv\$'"
}

# ---- machine (a): a CPU-less node 1 described by HMAT ----------------------
machine_numa() {
	cpuless_node node1_cpuless 1
	a=$N/node1/access0/initiators
	lat=$(rd $a/read_latency) bw=$(rd $a/read_bandwidth)
	check node1_hmat_sysfs "read_latency=$lat ns read_bandwidth=$bw MB/s, initiator $(ls $a | grep '^node' | tr '\n' ' ')" \
		[ "$lat" = 25 -a "$bw" = 5120 -a -e $a/node0 ]
	topo 1 cpuless
	n1=$(topo_node 1)
	check topo_hmat "node 1 JSON: $n1" \
		sh -c "echo '$n1' | grep -q '\"read_latency_ns\":$lat,.*\"read_bandwidth_mbps\":$bw,'"
	check topo_hmat_text "node 1 row: '$(grep '^  1 ' /tmp/topo.txt)'" \
		sh -c "grep '^  1 ' /tmp/topo.txt | grep -q ' $lat ns .* $bw MB/s'"
	placement 1 4
}

# ---- machine (b): CXL type-3 pmem -> region -> devdax -> system-ram ------
cxl_setup() {
	echo "--- CXL setup [$(up)s]"
	/sbin/modprobe -a cxl_acpi cxl_pci cxl_mem cxl_pmem nd_pmem dax_pmem device_dax kmem
	check modules "modprobe rc=$? ($(lsmod | awk 'NR>1{print $1}' | tr '\n' ' '))" true
	i=0   # cxl_pci probes asynchronously
	while [ $i -lt 100 ] && ! cxl list -M 2>/dev/null | grep -q '"memdev":"mem0"'; do
		sleep 0.2
		i=$((i + 1))
	done
	check cxl_mem0 "cxl list -M: $(cxl list -M 2>&1 | tr -d ' \n')" \
		sh -c "cxl list -M | grep -q '\"memdev\":\"mem0\"'"
	# -t ram would print "not supported" and exit 0: judge by cxl list -R
	cxl create-region -m -d decoder0.0 -w 1 -g 256 -t pmem mem0 > /tmp/region.out 2>&1
	check cxl_region0 "create-region rc=$?: $(cxl list -R 2>&1 | tr -d ' \n')" \
		sh -c "cxl list -R | grep -q '\"region\":\"region0\"'"
	ndctl create-namespace -m devdax -r region0 > /tmp/ns.out 2>&1
	check ndctl_devdax "create-namespace rc=$?: $(grep -o '"chardev":"[^"]*"\|"target_node":[0-9]*' /tmp/ns.out | tr '\n' ' ')" \
		[ -e /sys/bus/dax/devices/dax0.0 ]
	daxctl reconfigure-device --mode=system-ram dax0.0 > /tmp/dax.out 2>&1
	rc=$?
	i=0
	while [ $i -lt 50 ] && ! grep -q 2 $N/has_memory 2>/dev/null; do
		sleep 0.2
		i=$((i + 1))
	done
	check daxctl_system_ram "reconfigure-device rc=$rc, has_memory=$(rd $N/has_memory), $(grep -o '"mode":"[^"]*"\|"online_memblocks":[0-9]*\|"movable":[a-z]*' /tmp/dax.out | tr '\n' ' ')" \
		sh -c "[ -d $N/node2 ] && grep -q '\"mode\":\"system-ram\"' /tmp/dax.out"
	if [ $failed != 0 ]; then
		cat /tmp/region.out /tmp/ns.out /tmp/dax.out
		dmesg | tail -30
	fi
}

movable_only() {   # NODE: prints "<managed pages in zone Movable> <managed pages>"
	awk -v n="$1" '
		/^Node/ { gsub(",", "", $2); node = $2; zone = $4 }
		node == n && $1 == "managed" { tot += $2; if (zone == "Movable") mov += $2 }
		END { printf "%d %d\n", mov, tot; exit !(tot > 0 && mov == tot) }' /proc/zoneinfo
}

machine_cxl() {
	cxl_setup
	cpuless_node node2_cpuless 2
	mv=$(movable_only 2)
	check node2_movable "zoneinfo node 2: Movable/managed pages = ${mv% *}/${mv#* }" \
		sh -c "[ '${mv% *}' = '${mv#* }' ] && [ '${mv#* }' -gt 0 ]"
	check node2_tier "memory tiers: $(for t in /sys/devices/virtual/memory_tiering/memory_tier*; do printf '%s=%s ' ${t##*/} $(rd $t/nodelist); done)" true
	topo 2 cxl
	check topo_libcxl "$(grep -o '"cxl":{"source":"[a-z]*","status":"[a-z]*"' /tmp/topo.json)" \
		grep -q '"cxl":{"source":"libcxl","status":"ok"' /tmp/topo.json
	check topo_mem0 "$(grep -o '"memdevs":\[{"memdev":"mem0"[^}]*' /tmp/topo.json)" \
		grep -q '"memdev":"mem0"' /tmp/topo.json
	check topo_region0 "$(grep -o '{"region":"region0"[^]]*' /tmp/topo.json)" \
		grep -q '{"region":"region0","mode":"pmem",.*"node":2,' /tmp/topo.json
	n2=$(topo_node 2)
	check topo_node2 "node 2 JSON: $n2" \
		sh -c "echo '$n2' | grep -q '\"movable_only\":true,.*\"cxl\":true'"
	check topo_node2_text "node 2 row: '$(grep '^  2 ' /tmp/topo.txt)'" \
		sh -c "grep '^  2 ' /tmp/topo.txt | grep -Eq '^  2 +no .* yes +yes '"
	# place_probe writes 40 MiB: ~25 s in the emulated CXL window; vm_check
	# checks the same rules with 2 MiB buffers
	placement 2 2 noprobe
	llamacpp 2
}

case $1 in
numa) machine_numa ;;
cxl) machine_cxl ;;
*) fail scenario "unknown scenario '$1'" ;;
esac
if [ -x /extra/run.sh ]; then
	echo "--- /extra/run.sh $1 (VM_GUEST_EXTRA) [$(up)s]"
	/extra/run.sh "$1"
fi
echo "--- numactl -H [$(up)s]"
numactl -H
[ $failed = 0 ]

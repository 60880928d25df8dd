"""Self-time groups of a `perf report --no-children --sort sym -g none` listing.

Reads the report on stdin and prints each group's share of the samples, largest
first, so a profile reads as "h2 framing 12 %, kernel TCP send 30 %" instead of
a hundred symbols. A symbol falls in the first group whose pattern it matches;
the table's order matters (kernel symbols are matched by name, user-space ones
by crate path). Used by scripts/perf-profile.sh.
"""

import re
import sys

GROUPS = [
    # Kernel, by what the work is for.
    ("kernel: TCP/IP send+loopback receive", r"\[k\] .*(tcp_|__tcp|ip_|__ip|inet_|skb|loopback|"
     r"netif|net_rx|napi|__dev_queue|dev_hard|__sk_|sk_|sock_|__sock|__release_sock|"
     r"kfree_skbmem|__alloc_skb|validate_xmit|nf_|raw_v4|ipv4_|dst_release|__kfree_skb)"),
    ("kernel: copy to/from user", r"\[k\] .*(copy_user|_copy_to_iter|_copy_from_iter|copyin|"
     r"copyout|memcpy|memmove|csum_partial|skb_copy_datagram)"),
    ("kernel: epoll/wakeup/scheduler", r"\[k\] .*(ep_|epoll|__wake_up|try_to_wake_up|"
     r"schedule|enqueue|dequeue|update_curr|pick_next|select_task|ttwu|finish_task|"
     r"psi_|cpuacct|__switch_to|raw_spin|_raw_|native_queued|futex)"),
    ("kernel: speculation thunks (retpoline, SRSO)", r"\[k\] .*(__x86_indirect_thunk|"
     r"__x86_return_thunk|srso_|retbleed|entry_untrain|untrain_ret)"),
    ("kernel: syscall entry/exit", r"\[k\] .*(entry_SYSCALL|syscall_|do_syscall|"
     r"__x64_sys|exit_to_user|syscall_exit|fdget|fput|fget|bpf_lsm|__fsnotify|rw_verify|"
     r"security_|apparmor|aa_|import_iovec|__import_iovec|iovec|ksys_|vfs_|__audit)"),
    ("kernel: memory (page alloc, slab)", r"\[k\] .*(kmem_|kmalloc|kfree|__slab|slab_|"
     r"page|folio|___slab|__kmalloc|mod_memcg|memcg|rmqueue|__mem_cgroup|obj_cgroup)"),
    ("kernel: other", r"\[k\] "),
    # User space.
    ("registry code", r"\bregistry_\w+::|\bbenches::|\bhttp_floor::"),
    ("h2 (HTTP/2 framing, streams, flow control)", r"\bh2::"),
    ("hyper", r"\bhyper(_util)?::"),
    ("tonic (gRPC codec, body)", r"\btonic(_prost)?::"),
    ("prost (protobuf)", r"\bprost::"),
    ("tokio scheduling/timers/sync", r"\b(tokio|tokio_util|tokio_stream|mio)::"),
    ("allocation (jemalloc)", r"(_rjem_|je_|tikv_jemalloc|jemalloc|\bmalloc|\bfree\b|"
     r"realloc|calloc|__rust_alloc|__rust_dealloc|__rust_realloc|alloc::alloc|sdallocx|"
     r"mallocx|rallocx)"),
    ("memcpy/memmove/memset (libc)", r"(__mem(cpy|move|set)|\bmem(cpy|move|set|cmp)|"
     r"__memcmp)"),
    ("bytes", r"\bbytes::"),
    ("serde/serde_json (JSON)", r"\bserde(_json)?::"),
    ("httparse", r"\bhttparse::"),
    ("http/hpack headers", r"\b(http|fnv|indexmap|hashbrown)::"),
    ("std/core/alloc other", r"\b(std|core|alloc)::"),
    ("libc syscall stubs", r"\[\.\] (read|write|writev|readv|recv|send|sendto|recvfrom|sendmsg|"
     r"recvmsg|sendmmsg|epoll_wait|syscall|__GI___libc_\w+|__libc_\w+)$"),
    ("libc other", r"\[\.\] (__|_dl|pthread|clock_gettime|__vdso)"),
]


def main():
    line = re.compile(r"^\s*([0-9.]+)%\s+(.*)$")
    totals = {name: 0.0 for name, _ in GROUPS}
    totals["unresolved/other user"] = 0.0
    top = {name: [] for name in totals}
    compiled = [(name, re.compile(pat)) for name, pat in GROUPS]
    for raw in sys.stdin:
        m = line.match(raw)
        if not m:
            continue
        share, sym = float(m.group(1)), m.group(2).strip()
        group = next((n for n, p in compiled if p.search(sym)), "unresolved/other user")
        totals[group] += share
        top[group].append((share, sym))
    for name, share in sorted(totals.items(), key=lambda kv: -kv[1]):
        if share < 0.05:
            continue
        best = sorted(top[name], reverse=True)[:3]
        shown = "; ".join(f"{s:.1f} {short(sym)}" for s, sym in best)
        print(f"{share:6.1f} %  {name}  [{shown}]")


def short(sym):
    sym = re.sub(r"^\[[k.]\]\s+", "", sym)
    return sym if len(sym) <= 70 else sym[:67] + "..."


if __name__ == "__main__":
    main()

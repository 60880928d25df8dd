"""Where a profile's samples ran, by task: `perf script --inline` output on stdin.

Each sample is put in the first task of TASKS whose marker frame is on its
stack (the notifier, a gRPC stream's own task, hyper's per-stream body pipe,
the h2 connection task, ...), and within it in the first part of SUBS met from
the leaf (the writev syscall, tonic's encode, h2's frame decoding, ...). Prints
shares of all samples. Used by scripts/perf-profile.sh for the push case.
"""

import collections
import re
import sys

samples = [s for s in sys.stdin.read().split('\n\n') if s.strip()]
def frames(s):
    out=[]
    for l in s.strip().split('\n')[1:]:
        m=re.match(r'\s*[0-9a-f]+\s+(.*?)(\+0x[0-9a-f]+)?\s+\(',l)
        out.append(m.group(1) if m else l.strip())
    return out
# (name, marker regex) checked root-first: the first marker met from the root names the task;
# then a sub-part by the first sub-marker found anywhere in the stack (leaf side).
TASKS=[
 ('notifier task', r'registry_server::notifier::run'),
 ('gRPC stream task (acks, detection)', r'registry_server::grpc::stream::run'),
 ('h2 connection task (hyper Server::poll)', r'hyper::proto::h2::server::Server<|serve_connection'),
 ('unary calls (health checks)', r'RequestService'),
 ('per-stream body pipe (hyper H2Stream)', r'hyper::proto::h2::server::H2Stream'),
 ('HTTP/1 connection', r'registry_server::http::conn::serve'),
 ('runtime park: epoll + timers', r'park_internal|Driver::turn|park_timeout'),
 ('tokio scheduler', r'tokio::runtime::scheduler'),
]
SUBS=[
 ('writev syscall', r'__GI___writev|do_writev'),
 ('sendto syscall', r'__x64_sys_sendto|__send\b|__libc_send'),
 ('recv syscall', r'__libc_recv|__x64_sys_recvfrom'),
 ('epoll_wait', r'epoll_wait'),
 ('tonic encode (copy into per-stream buffer, growth)', r'tonic::codec::encode'),
 ('tonic/prost decode', r'tonic::codec::decode|ProstDecoder|prost::'),
 ('h2 frame decode/recv', r'recv_frame|framed_read|decode_frame'),
 ('h2 send_data/queue/encode frames', r'send_data|queue_frame|framed_write::Encoder|Prioritize'),
 ('h2 poll_reset (streams lock)', r'poll_reset'),
 ('allocation', r'_rjem_|rallocx|mallocx|sdallocx'),
]
tot=len(samples); c=collections.Counter(); sub=collections.Counter()
for s in samples:
    fr=frames(s); root=list(reversed(fr)); task='other'
    for name,pat in TASKS:
        if any(re.search(pat,f) for f in root): task=name; break
    part='rest'
    for name,pat in SUBS:
        if any(re.search(pat,f) for f in fr): part=name; break
    c[task]+=1; sub[(task,part)]+=1
print('samples',tot)
for t,v in c.most_common():
    print('%5.1f %%  %s'%(100*v/tot,t))
    for (tt,p),w in sorted(sub.items(),key=lambda kv:-kv[1]):
        if tt==t and 100*w/tot>=0.5: print('          %5.1f %%  %s'%(100*w/tot,p))

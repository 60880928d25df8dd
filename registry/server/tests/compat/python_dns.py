"""dnspython 2.7.0 against the registry's DNS door (registry/server/tests/dns.rs).

Usage: python_dns.py PORT TRANSPORT NAME TYPE [PAYLOAD]
TRANSPORT is udp or tcp; PAYLOAD, when given, is the EDNS0 size offered.
Prints one JSON object: rcode, flags, answer, additional and authority
records as text, so the Rust test asserts on what a real client decoded.
"""

import json
import sys

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype


def main():
    port = int(sys.argv[1])
    transport = sys.argv[2]
    name = sys.argv[3]
    rdtype = dns.rdatatype.from_text(sys.argv[4])
    payload = int(sys.argv[5]) if len(sys.argv) > 5 else None
    query = dns.message.make_query(
        name, rdtype, use_edns=payload is not None, payload=payload or 512
    )
    if transport == "tcp":
        response = dns.query.tcp(query, "127.0.0.1", port=port, timeout=10)
    else:
        # raise_on_truncation=False (the default): report the TC bit.
        response = dns.query.udp(query, "127.0.0.1", port=port, timeout=5)

    def records(section):
        out = []
        for rrset in section:
            for rdata in rrset:
                out.append(
                    {
                        "name": rrset.name.to_text(),
                        "ttl": rrset.ttl,
                        "type": dns.rdatatype.to_text(rrset.rdtype),
                        "data": rdata.to_text(),
                    }
                )
        return out

    print(
        json.dumps(
            {
                "rcode": dns.rcode.to_text(response.rcode()),
                "flags": dns.flags.to_text(response.flags).split(),
                "answer": records(response.answer),
                "additional": records(response.additional),
                "authority": records(response.authority),
            }
        )
    )


if __name__ == "__main__":
    main()

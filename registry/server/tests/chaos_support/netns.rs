//! A private network of Linux network namespaces, one per node, for the
//! chaos tests: every pair of nodes joined by its own veth link, so any
//! partition is a set of links taken down, and the test process (in the
//! root namespace) joined to every node by a client link that faults never
//! touch, so it observes both sides of a partition.
//!
//! Addresses: node `i` is `10.77.K.(i+1)` on its loopback device, reached
//! from node `j` through the `j`-`i` link by a /32 device route, and from the
//! test through the client link, whose root end holds `10.78.K.254` (the
//! only address a node can send to besides its peers). There is no default
//! route anywhere: a link that is down leaves nothing to route through, and
//! nothing outside these namespaces is ever addressed. `K` is chosen per
//! process so two test binaries never share addresses.

use std::net::Ipv4Addr;
use std::process::Command;

/// The namespaces and links; removed when dropped.
pub struct Net {
    prefix: String,
    n: usize,
    k: u8,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// Creates `n` namespaces joined pairwise; `Err` with the reason when
    /// this process may not (not root, no `ip`).
    pub fn create(n: usize) -> Result<Net, String> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let serial = std::process::id() * 8 + NEXT.fetch_add(1, Ordering::Relaxed);
        let net = Net {
            prefix: format!("rc{}", serial % 100_000),
            n,
            k: (serial % 250) as u8,
        };
        // Leftovers of an earlier run with the same name go first.
        for i in 0..n {
            let _ = ip(&["netns", "del", &net.ns(i)]);
        }
        for i in 0..n {
            ip(&["netns", "add", &net.ns(i)])?;
            ip(&["-n", &net.ns(i), "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                &net.ns(i),
                "addr",
                "add",
                &format!("{}/32", net.addr(i)),
                "dev",
                "lo",
            ])?;
        }
        for i in 0..n {
            for j in i + 1..n {
                ip(&[
                    "link",
                    "add",
                    &format!("to{j}"),
                    "netns",
                    &net.ns(i),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &format!("to{i}"),
                    "netns",
                    &net.ns(j),
                ])?;
            }
            net.client_link(i)?;
        }
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    net.link_up(i, j)?;
                }
            }
        }
        Ok(net)
    }

    /// Node `i`'s namespace name.
    pub fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    /// Node `i`'s address.
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.k, i as u8 + 1)
    }

    fn client_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 78, self.k, 254)
    }

    fn client_link(&self, i: usize) -> Result<(), String> {
        let root_end = format!("{}c{i}", self.prefix);
        let ns = self.ns(i);
        ip(&[
            "link", "add", &root_end, "type", "veth", "peer", "name", "client", "netns", &ns,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/32", self.client_addr()),
            "dev",
            &root_end,
        ])?;
        ip(&["link", "set", &root_end, "up"])?;
        ip(&["-n", &ns, "link", "set", "client", "up"])?;
        ip(&[
            "route",
            "replace",
            &format!("{}/32", self.addr(i)),
            "dev",
            &root_end,
            "src",
            &self.client_addr().to_string(),
        ])?;
        ip(&[
            "-n",
            &ns,
            "route",
            "replace",
            &format!("{}/32", self.client_addr()),
            "dev",
            "client",
        ])
    }

    /// Brings node `i`'s end of the `i`-`j` link up and routes `j` over it
    /// (a link taken down loses its routes).
    fn link_up(&self, i: usize, j: usize) -> Result<(), String> {
        let ns = self.ns(i);
        ip(&["-n", &ns, "link", "set", &format!("to{j}"), "up"])?;
        ip(&[
            "-n",
            &ns,
            "route",
            "replace",
            &format!("{}/32", self.addr(j)),
            "dev",
            &format!("to{j}"),
            "src",
            &self.addr(i).to_string(),
        ])
    }

    /// Cuts the link between `i` and `j` (both ends down).
    pub fn cut(&self, i: usize, j: usize) {
        for (a, b) in [(i, j), (j, i)] {
            let _ = ip(&["-n", &self.ns(a), "link", "set", &format!("to{b}"), "down"]);
        }
    }

    /// Restores the link between `i` and `j`.
    pub fn heal(&self, i: usize, j: usize) {
        for (a, b) in [(i, j), (j, i)] {
            if let Err(e) = self.link_up(a, b) {
                panic!("healing {a}-{b}: {e}");
            }
        }
    }

    /// Splits the nodes into `side` and the rest: every link across cut.
    pub fn split(&self, side: &[usize]) {
        for i in side {
            for j in 0..self.n {
                if !side.contains(&j) {
                    self.cut(*i, j);
                }
            }
        }
    }

    /// Restores every link.
    pub fn heal_all(&self) {
        for i in 0..self.n {
            for j in i + 1..self.n {
                self.heal(i, j);
            }
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth ends, and with them the
        // peers' ends and the root ends of the client links.
        for i in 0..self.n {
            let _ = ip(&["netns", "del", &self.ns(i)]);
        }
    }
}

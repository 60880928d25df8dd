//! A deliberate slowdown of the instance write handlers, off unless
//! `REGISTRY_SLOW_HANDLER_FOR_GATE_TEST` names a number of loop rounds: the
//! instruction-count gate's self-test (`scripts/gates.sh`) sets it for one
//! side to prove that a slower real handler fails the gate, so a gate that
//! measured copies of the handlers again would be caught.
//!
//! Read once per process; when unset, a handler pays one load and one
//! branch.

use std::hint::black_box;
use std::sync::LazyLock;

/// The variable the gate's self-test sets.
pub const VAR: &str = "REGISTRY_SLOW_HANDLER_FOR_GATE_TEST";

static ROUNDS: LazyLock<u32> = LazyLock::new(|| {
    std::env::var(VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
});

/// Called inside the 1.x and 2.x instance write handlers.
#[inline]
pub(crate) fn slow_handler() {
    let rounds = *ROUNDS;
    if rounds > 0 {
        burn(rounds);
    }
}

#[cold]
#[inline(never)]
fn burn(rounds: u32) {
    let mut x = 0u64;
    for i in 0..rounds {
        x = black_box(x.wrapping_mul(31).wrapping_add(u64::from(i)));
    }
    black_box(x);
}

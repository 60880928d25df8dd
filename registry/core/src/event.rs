//! Change events: what the store tells the notifier after a visible write.

use crate::model::ServiceKey;

/// A service changed and readers can see revision `revision`. The notifier
/// only needs the key: it loads the latest snapshot itself, so events may
/// be coalesced, last revision wins.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChangeEvent {
    /// The service that changed.
    pub service: ServiceKey,
    /// Its revision after the change.
    pub revision: u64,
}

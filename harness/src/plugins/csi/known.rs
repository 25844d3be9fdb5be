//! What the run knows exists in the plugin, across every clause: the volumes and snapshots its
//! calls made (a successful CreateVolume or CreateSnapshot), and which of them some call has
//! since tried to delete, whatever the answer. A listing must show every volume made before it
//! started and never asked to be deleted, wherever the plugin puts it on its pages: the listing
//! clauses compare with this record, not only with what they made themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// IDs made, and IDs some call tried to delete.
#[derive(Debug, Default)]
pub struct Known {
    inner: Mutex<KnownInner>,
}

#[derive(Debug, Default)]
struct KnownInner {
    /// Each ID made, with the order it was seen in.
    made: BTreeMap<String, u64>,
    deleting: BTreeSet<String>,
    seen: u64,
}

impl Known {
    /// A successful create answered `id`.
    pub fn made(&self, id: &str) {
        if id.is_empty() {
            return;
        }
        let mut k = self.lock();
        k.seen += 1;
        let n = k.seen;
        k.made.entry(id.to_string()).or_insert(n);
    }

    /// A delete of `id` is about to be sent (its answer does not matter: the plugin may have
    /// deleted it whatever it says).
    pub fn deleting(&self, id: &str) {
        self.lock().deleting.insert(id.to_string());
    }

    /// Every ID made and never asked to be deleted, at this moment.
    pub fn live(&self) -> BTreeSet<String> {
        let k = self.lock();
        k.made
            .keys()
            .filter(|id| !k.deleting.contains(*id))
            .cloned()
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KnownInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::Known;

    #[test]
    fn a_volume_asked_to_be_deleted_is_no_longer_required() {
        let k = Known::default();
        k.made("a");
        k.made("b");
        k.made("");
        k.deleting("a");
        assert_eq!(k.live().into_iter().collect::<Vec<_>>(), vec!["b"]);
    }
}

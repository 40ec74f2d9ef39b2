//! What a report covers, gathered in one pass and in bounded memory:
//! counts by kind, the oldest objects to list, and at exit the whole
//! table grouped by context.

use std::collections::{BinaryHeap, HashMap};

use crate::oom;
use crate::registry::contexts::ContextInfo;
use crate::registry::devices::{self, LiveList};
use crate::registry::objects::{self, Kind, Obj};
use report_model::Kind as ReportKind;

use super::suppress::{Suppressor, Why};

/// Objects listed one by one in a text report; the rest are counted (the
/// JSON report has them all).
pub(super) const TEXT_LIMIT: usize = 100;

/// The report's kind of a tracked object.
pub(super) fn kind_of(o: &Obj) -> ReportKind {
    o.kind().report()
}

/// Counts by kind, shown as "1 pd, 2 mr".
#[derive(Clone, Copy, Default)]
pub(super) struct Counts(pub(super) [usize; ReportKind::ALL.len()]);

impl Counts {
    pub(super) fn add(&mut self, kind: ReportKind) {
        self.0[kind.index()] += 1;
    }

    pub(super) fn add_obj(&mut self, o: &Obj) {
        self.add(kind_of(o));
    }

    pub(super) fn total(&self) -> usize {
        self.0.iter().sum()
    }

    pub(super) fn minus(&self, other: &Counts) -> Counts {
        let mut c = *self;
        c.0.iter_mut()
            .zip(other.0)
            .for_each(|(a, b)| *a = a.saturating_sub(b));
        c
    }
}

/// Listing order: oldest first; a PD before what sits on it when both were
/// made in the same millisecond.
pub(super) fn age(o: &Obj) -> (u64, Kind, usize) {
    (o.time_ms(), o.kind(), o.addr)
}

/// An object ordered by [`age`].
pub(super) struct Aged(pub(super) Obj);

impl PartialEq for Aged {
    fn eq(&self, other: &Self) -> bool {
        age(&self.0) == age(&other.0)
    }
}

impl Eq for Aged {}

impl PartialOrd for Aged {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Aged {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        age(&self.0).cmp(&age(&other.0))
    }
}

/// What a report gathers about one context's objects in a single pass, in
/// bounded memory however many there are: counts, and the [`TEXT_LIMIT`]
/// oldest unsuppressed objects to list.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) loud: Counts,
    pub(super) quiet: Quiet,
    /// A max-heap of the oldest seen so far.
    pub(super) oldest: BinaryHeap<Aged>,
}

impl Tally {
    pub(super) fn add(&mut self, o: &Obj, quiet: Option<Why>) {
        if let Some(why) = quiet {
            self.quiet.add(why);
            return;
        }
        self.loud.add_obj(o);
        if self.oldest.len() < TEXT_LIMIT {
            // Out of memory it is counted, not listed.
            if oom::fallibly(|| self.oldest.try_reserve(1)).is_some() {
                self.oldest.push(Aged(*o));
            }
        } else if self.oldest.peek().is_some_and(|top| age(o) < age(&top.0)) {
            self.oldest.pop();
            self.oldest.push(Aged(*o));
        }
    }
}

/// Objects left allocated that are not leaks, by why.
#[derive(Clone, Default)]
pub(super) struct Quiet {
    pub(super) user: usize,
    /// By library, in the order first seen.
    pub(super) kept: Vec<(&'static str, usize)>,
}

impl Quiet {
    pub(super) fn add(&mut self, why: Why) {
        match why {
            Why::User => self.user += 1,
            Why::Kept(owner) => match self.kept.iter_mut().find(|(o, _)| *o == owner) {
                Some((_, n)) => *n += 1,
                None => {
                    if oom::fallibly(|| self.kept.try_reserve(1)).is_some() {
                        self.kept.push((owner, 1));
                    }
                }
            },
        }
    }

    pub(super) fn total(&self) -> usize {
        self.user + self.kept.iter().map(|(_, n)| n).sum::<usize>()
    }
}

/// How the exit report heads one context's objects.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// Never closed.
    Open,
    /// Closed with these objects still allocated (zombies).
    Closed,
    /// Not opened by this process (a parent's, inherited across fork).
    Foreign,
}

/// One context's objects at exit.
pub(super) struct Group<'a> {
    pub(super) ctx: usize,
    pub(super) info: Option<&'a ContextInfo>,
    pub(super) how: How,
    pub(super) tally: Tally,
}

/// What the exit report covers, gathered in one pass over the table.
pub(super) struct Inventory<'a> {
    /// Contexts never closed (and why not a leak, if not).
    pub(super) open: Vec<(usize, &'a ContextInfo, Option<Why>)>,
    /// Device lists never freed (and why not a leak, if not).
    pub(super) lists: Vec<(LiveList, Option<Why>)>,
    /// Objects by (context, zombie): open contexts in opening order, then
    /// zombies by closed context, then contexts this process never opened.
    pub(super) groups: Vec<Group<'a>>,
    pub(super) index: HashMap<(usize, bool), usize>,
    pub(super) loud: Counts,
    pub(super) quiet: Quiet,
    /// [`oom::dropped`] before the inventory was taken.
    pub(super) dropped: usize,
}

impl<'a> Inventory<'a> {
    pub(super) fn take(
        all: &'a [(usize, ContextInfo)],
        zombies: &'a [(usize, ContextInfo)],
        sup: &mut Suppressor,
    ) -> Self {
        let mut inv = Inventory {
            open: Vec::new(),
            lists: Vec::new(),
            groups: Vec::new(),
            index: HashMap::new(),
            loud: Counts::default(),
            quiet: Quiet::default(),
            dropped: oom::dropped(),
        };
        // Out of memory, what cannot be held is counted but not listed
        // (the report then says it is truncated).
        for (ctx, c) in all.iter().filter(|(_, c)| c.open) {
            let quiet = sup.site(ReportKind::Context.name(), c.caller);
            inv.count(ReportKind::Context, quiet);
            if oom::fallibly(|| inv.open.try_reserve(1)).is_some() {
                inv.open.push((*ctx, c, quiet));
            }
            inv.group(*ctx, false, Some(c), How::Open);
        }
        for l in devices::live_lists() {
            let quiet = sup.site(ReportKind::DeviceList.name(), l.caller);
            inv.count(ReportKind::DeviceList, quiet);
            if oom::fallibly(|| inv.lists.try_reserve(1)).is_some() {
                inv.lists.push((l, quiet));
            }
        }
        for (ctx, c) in zombies.iter().rev() {
            // The last context closed at an address owns its zombies.
            if !inv.index.contains_key(&(*ctx, true)) {
                inv.group(*ctx, true, Some(c), How::Closed);
            }
        }
        objects::for_each(|o| {
            let quiet = sup.obj(o);
            inv.count(kind_of(o), quiet);
            let key = (o.ctx, o.is_zombie());
            let i = match inv.index.get(&key) {
                Some(&i) => Some(i),
                None => inv.group(
                    o.ctx,
                    o.is_zombie(),
                    None,
                    if o.is_zombie() {
                        How::Closed
                    } else {
                        How::Foreign
                    },
                ),
            };
            if let Some(i) = i {
                inv.groups[i].tally.add(o, quiet);
            }
        });
        inv
    }

    pub(super) fn count(&mut self, kind: ReportKind, quiet: Option<Why>) {
        if let Some(why) = quiet {
            self.quiet.add(why);
        } else {
            self.loud.add(kind);
        }
    }

    pub(super) fn group(
        &mut self,
        ctx: usize,
        zombie: bool,
        info: Option<&'a ContextInfo>,
        how: How,
    ) -> Option<usize> {
        oom::fallibly(|| self.groups.try_reserve(1))?;
        oom::fallibly(|| self.index.try_reserve(1))?;
        self.groups.push(Group {
            ctx,
            info,
            how,
            tally: Tally::default(),
        });
        self.index.insert((ctx, zombie), self.groups.len() - 1);
        Some(self.groups.len() - 1)
    }

    /// The context an object is reported under.
    pub(super) fn info_of(&self, o: &Obj) -> Option<&'a ContextInfo> {
        self.index
            .get(&(o.ctx, o.is_zombie()))
            .and_then(|&i| self.groups[i].info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_in_report_order() {
        let mut c = Counts::default();
        [
            ReportKind::Mr,
            ReportKind::Pd,
            ReportKind::Mr,
            ReportKind::Context,
        ]
        .into_iter()
        .for_each(|k| c.add(k));
        assert_eq!(c.to_string(), "1 context, 1 pd, 2 mr");
        let mr = Obj::new(Kind::Mr, 16, 0, 0, 0, 1);
        let mut d = Counts::default();
        d.add_obj(&mr);
        assert_eq!(d.0[ReportKind::Mr.index()], 1);
        assert_eq!(d.to_string(), "1 mr");
    }

    #[test]
    fn the_registry_s_kinds_are_named_as_the_report_model_names_them() {
        for k in Kind::ALL {
            let o = Obj::new(k, 16, 0, 0, 0, 1);
            assert_eq!(kind_of(&o).name(), k.name());
        }
    }
}

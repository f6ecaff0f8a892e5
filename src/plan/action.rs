//! What apply does to one object, as users see it: the plan prints it, `--json` names it,
//! the engine runs it. One enum, so the three cannot disagree (Terraform's `plans.Action`).

use crate::resources::offering::Purchase;

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Create,
    /// A create that spends non-refundable money (a Capacity Block): shown with its offer,
    /// and run only with `--approve-purchases`.
    Purchase(Offer),
    Update,
    /// Replace an object whose new copy needs the old one gone first (a unique name).
    DeleteThenCreate,
    /// Replace with the new object made first, so dependents move over before the delete.
    CreateThenDelete,
    Delete,
    /// Stop managing what cannot be deleted (a bought Capacity Block runs to its end date).
    Retain,
    /// Record in state an object found by its tags, or a state-only change; AWS untouched.
    Adopt,
    /// Take over an object the stack did not make (`[import]`): tag it with
    /// `gpustack:stack` and `gpustack:address`, record it in state, then update the fields
    /// the plan lists (none: only the tags and the record). `=` like an adoption.
    Import,
    /// Read an object the stack names but does not own (`existing = ...`): its outputs are
    /// recorded in state for the resources that refer to it; AWS is untouched (Terraform's
    /// data sources, `<=`).
    Read,
    /// Drop a read object (`existing`) from state: it is no longer in the stack, or the
    /// stack is destroyed. AWS is untouched, the object stays as it is (Terraform's `.`).
    Forget,
    /// Written as Kubernetes YAML by `gpustack manifests`, never applied to AWS: the file,
    /// and its text as last applied (none when new) and as it will be.
    Render(Box<Rendering>),
}

/// A rendered resource's YAML before and after the change.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendering {
    pub file: String,
    pub old: Option<String>,
    pub new: String,
}

/// What a plan knows of a purchase's offering.
#[derive(Clone, Debug, PartialEq)]
pub enum Offer {
    /// The diff's proposal before any price step: no offering searched.
    NotSearched,
    /// Planned without AWS (`--refresh=false`): what a refreshing plan will search for.
    Offline(String),
    /// The offering the plan proposes to buy, with its price.
    Found(Purchase),
}

impl Action {
    /// The plan's symbol (Terraform's, plus `+/-` for create before destroy).
    pub fn symbol(&self) -> &'static str {
        match self {
            Action::Create | Action::Purchase(_) => "+",
            Action::Update => "~",
            Action::CreateThenDelete => "+/-",
            Action::DeleteThenCreate => "-/+",
            Action::Delete | Action::Retain => "-",
            Action::Adopt | Action::Import => "=",
            Action::Read => "<=",
            Action::Forget => ".",
            Action::Render(_) => "»",
        }
    }

    /// The name `--json` gives it. Both replace orders are `replace` (with `replace_order`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Purchase(_) => "purchase",
            Action::Update => "update",
            Action::DeleteThenCreate | Action::CreateThenDelete => "replace",
            Action::Delete => "delete",
            Action::Retain => "retain",
            Action::Adopt => "adopt",
            Action::Import => "import",
            Action::Read => "read",
            Action::Forget => "forget",
            Action::Render(_) => "render",
        }
    }

    pub fn is_replace(&self) -> bool {
        matches!(self, Action::DeleteThenCreate | Action::CreateThenDelete)
    }

    /// True for the actions that make a new object in AWS (a replacement makes one too).
    pub fn creates(&self) -> bool {
        matches!(self, Action::Create | Action::Purchase(_) | Action::DeleteThenCreate | Action::CreateThenDelete)
    }

    /// True for the actions that remove an object from gpustack's hands.
    pub fn is_removal(&self) -> bool {
        matches!(self, Action::Delete | Action::Retain)
    }

    /// The offering a purchase will buy, once a refreshing plan found it.
    pub fn purchase(&self) -> Option<&Purchase> {
        match self {
            Action::Purchase(Offer::Found(p)) => Some(p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_has_a_symbol_and_a_json_name() {
        let all = [
            (Action::Create, "+", "create"),
            (Action::Purchase(Offer::NotSearched), "+", "purchase"),
            (Action::Update, "~", "update"),
            (Action::DeleteThenCreate, "-/+", "replace"),
            (Action::CreateThenDelete, "+/-", "replace"),
            (Action::Delete, "-", "delete"),
            (Action::Retain, "-", "retain"),
            (Action::Adopt, "=", "adopt"),
            (Action::Import, "=", "import"),
            (Action::Read, "<=", "read"),
            (Action::Forget, ".", "forget"),
            (Action::Render(Box::new(Rendering { file: "f".into(), old: None, new: "n".into() })), "»", "render"),
        ];
        for (a, sym, name) in all {
            assert_eq!((a.symbol(), a.name()), (sym, name), "{a:?}");
        }
        assert!(Action::Retain.is_removal() && !Action::Adopt.is_removal());
        assert!(Action::Purchase(Offer::Offline("x".into())).purchase().is_none());
    }
}

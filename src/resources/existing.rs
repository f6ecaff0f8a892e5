//! Objects a stack names but does not own: `existing = "subnet-0abc…"` or
//! `existing = { tags = { Name = "private-a" }, vpc = "…" }` on `vpc`, `subnet`,
//! `security_group` and `capacity_reservation`. Such a resource is read, never created,
//! changed or deleted: a refreshing plan describes it (one call per kind for the literal
//! ids, one per tag lookup), records what it read in state as a `read` (`<=`), and
//! `destroy` or removing it from the stack only *forgets* it (`.`). A tag lookup must match
//! exactly one object. Offline (`validate`, `plan --refresh=false`) only a literal id is
//! known; the rest is read by the next refreshing plan.
//!
//! This module holds what the four kinds share: the attribute, its offline checks and
//! the lookup's shape. Each kind answers the lookup with its own Describe call
//! ([`super::Kind::read_existing`]).

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;

use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::state::ResourceState;
use crate::value::Value;

/// `existing`: a literal id or `{ tags = {...}, vpc = "..." }` (checked by [`validate`]).
pub const EXISTING: Attr = Attr::opt("existing", Ty::Any, Default::None, OnChange::Replace);

/// How a stack names an object it does not own.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    /// Its id, as AWS shows it (`subnet-0abc…`).
    Id(String),
    /// Every tag given must match; `vpc` narrows the search to one VPC.
    Tags { tags: BTreeMap<String, String>, vpc: Option<String> },
}

impl Lookup {
    /// The lookup a resolved `existing` value says; `None` while part of it is unknown (a
    /// `vpc` this plan creates) or when it is malformed (validation reported that).
    pub fn of(v: &Value) -> Option<Lookup> {
        match v {
            Value::Str(id) => Some(Lookup::Id(id.clone())),
            Value::Table(t) => {
                let tags = t.get("tags")?.as_table()?;
                let tags: BTreeMap<String, String> =
                    tags.iter().map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect::<Option<_>>()?;
                let vpc = match t.get("vpc") {
                    None => None,
                    Some(Value::Str(s)) => Some(s.clone()),
                    Some(_) => return None,
                };
                Some(Lookup::Tags { tags, vpc })
            }
            _ => None,
        }
    }

    /// The EC2 filters of a tag lookup: `tag:<key>` per tag, and `vpc-id` when scoped.
    /// Both are in the EC2 API reference's filter lists of DescribeVpcs, DescribeSubnets and
    /// DescribeSecurityGroups (`tag:<key>`; `vpc-id` for the last two).
    pub fn ec2_filters(&self) -> Vec<Filter> {
        let Lookup::Tags { tags, vpc } = self else { return vec![] };
        let mut f: Vec<Filter> =
            tags.iter().map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build()).collect();
        if let Some(v) = vpc {
            f.push(Filter::builder().name("vpc-id").values(v).build());
        }
        f
    }

    /// For messages: `subnet-0abc` or `tags Name=private-a in vpc-1`.
    pub fn describe(&self) -> String {
        match self {
            Lookup::Id(id) => id.clone(),
            Lookup::Tags { tags, vpc } => {
                let t: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
                match vpc {
                    Some(v) => format!("tags {} in {v}", t.join(", ")),
                    None => format!("tags {}", t.join(", ")),
                }
            }
        }
    }
}

/// The resource reads an object it does not own.
pub fn is_existing(r: &Resource) -> bool {
    r.attrs.contains_key("existing")
}

/// The state entry records a read object (never deleted, only forgotten).
pub fn in_state(e: &ResourceState) -> bool {
    e.inputs.contains_key("existing")
}

/// Offline checks of `existing`: a literal id with the kind's prefix (`subnet-`), or a
/// table of `tags` (at least one) and, where `scoped` allows, `vpc`; and no attribute that
/// would create the object, since nothing is created.
pub fn validate(r: &Resource, prefix: &str, scoped: bool, diags: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("existing") else { return };
    let example = if scoped {
        format!(
            "existing = \"{prefix}0123456789abcdef0\", or existing = {{ tags = {{ Name = \"private-a\" }}, vpc = \"vpc-…\" }}"
        )
    } else {
        format!("existing = \"{prefix}0123456789abcdef0\", or existing = {{ tags = {{ Name = \"shared\" }} }}")
    };
    let value = e.resolve(&|_| Value::Unknown);
    match &value {
        Value::Str(id) if !id.starts_with(prefix) || id.len() == prefix.len() => diags.push(
            Diagnostic::error(
                format!(
                    "`{}.existing`: \"{id}\" is not a {} id (they start with `{prefix}`)",
                    r.address,
                    r.kind.name()
                ),
                e.span.clone(),
            )
            .help(format!("write the id AWS shows, or look it up by tags: {example}")),
        ),
        Value::Str(_) | Value::Unknown => {}
        Value::Table(t) => {
            for k in t.keys().filter(|k| !(k.as_str() == "tags" || (scoped && k.as_str() == "vpc"))) {
                let valid = if scoped { "tags, vpc" } else { "tags" };
                diags.push(
                    Diagnostic::error(format!("unknown key `{k}` in `{}.existing`", r.address), e.span.clone())
                        .help(format!("valid keys: {valid}; for example {example}")),
                );
            }
            match t.get("tags") {
                Some(Value::Table(tags))
                    if !tags.is_empty() && tags.values().all(|v| v.as_str().is_some() || !v.is_known()) => {}
                _ => diags.push(
                    Diagnostic::error(
                        format!(
                            "`{}.existing` needs `tags`, a table of one or more tags (strings) the object has",
                            r.address
                        ),
                        e.span.clone(),
                    )
                    .help(format!("for example {example}")),
                ),
            }
            if let Some(v) = t.get("vpc")
                && v.is_known()
                && v.as_str().is_none_or(|s| !s.starts_with("vpc-"))
            {
                diags.push(
                    Diagnostic::error(format!("`{}.existing.vpc` must be a VPC id", r.address), e.span.clone())
                        .help("write \"vpc-…\" or a reference such as \"${vpc.shared.id}\""),
                );
            }
        }
        other => diags.push(
            Diagnostic::error(
                format!("`{}.existing` must be an id or a table with `tags`, found {}", r.address, other.type_name()),
                e.span.clone(),
            )
            .help(format!("for example {example}")),
        ),
    }
    for (k, a) in r.attrs.iter().filter(|(k, _)| k.as_str() != "existing") {
        diags.push(
            Diagnostic::error(
                format!("`{}` reads an existing {}, so `{k}` has nothing to set", r.address, r.kind.name()),
                a.key_span.clone().or(a.span.clone()),
            )
            .help(format!(
                "remove `{k}`: an object named by `existing` is read, never created or changed (drop `existing` to have the stack create and own it)"
            )),
        );
    }
}

/// Answers `lookups` with `describe` (one Describe call with the given filters): the
/// literal ids together, by the `id_filter` filter (an id AWS does not know is then simply
/// not found, where the ids parameter would fail the whole call), then one call per tag
/// lookup. `what` names the object in messages ("subnet").
pub async fn resolve<F, Fut>(
    lookups: &[Lookup],
    what: &str,
    id_filter: &str,
    describe: F,
) -> super::Result<Vec<std::result::Result<super::Recorded, String>>>
where
    F: Fn(Vec<Filter>) -> Fut,
    Fut: std::future::Future<Output = super::Result<Vec<super::Recorded>>>,
{
    let ids: Vec<String> =
        lookups.iter().filter_map(|l| if let Lookup::Id(i) = l { Some(i.clone()) } else { None }).collect();
    let by_id = if ids.is_empty() {
        vec![]
    } else {
        describe(vec![Filter::builder().name(id_filter).set_values(Some(ids)).build()]).await?
    };
    let mut out = vec![];
    for l in lookups {
        let found: Vec<(String, super::Recorded)> = match l {
            Lookup::Id(id) => by_id.iter().filter(|r| &r.id == id).map(|r| (r.id.clone(), r.clone())).collect(),
            Lookup::Tags { .. } => describe(l.ec2_filters()).await?.into_iter().map(|r| (r.id.clone(), r)).collect(),
        };
        out.push(one(l, what, found).map(|(_, r)| r));
    }
    Ok(out)
}

/// Exactly one match, or what went wrong, listing the matches.
pub fn one<T>(lookup: &Lookup, what: &str, mut found: Vec<(String, T)>) -> std::result::Result<(String, T), String> {
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(match lookup {
            Lookup::Id(id) => format!("no {what} {id} in this account and region"),
            Lookup::Tags { .. } => format!("no {what} has {}", lookup.describe()),
        }),
        n => {
            let ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
            Err(format!("{n} {what}s have {}: {}; a lookup must match exactly one", lookup.describe(), ids.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_read_ids_and_tag_tables() {
        assert_eq!(Lookup::of(&Value::str("subnet-1")), Some(Lookup::Id("subnet-1".into())));
        let t = Value::Table(BTreeMap::from([
            ("tags".into(), Value::Table(BTreeMap::from([("Name".into(), Value::str("a"))]))),
            ("vpc".into(), Value::str("vpc-1")),
        ]));
        let l = Lookup::of(&t).unwrap();
        assert_eq!(l.describe(), "tags Name=a in vpc-1");
        let names: Vec<String> = l.ec2_filters().iter().map(|f| f.name().unwrap_or_default().to_string()).collect();
        assert_eq!(names, ["tag:Name", "vpc-id"]);
        // A vpc this plan creates is unknown: nothing to look up yet.
        let unknown = Value::Table(BTreeMap::from([
            ("tags".into(), Value::Table(BTreeMap::from([("Name".into(), Value::str("a"))]))),
            ("vpc".into(), Value::Unknown),
        ]));
        assert_eq!(Lookup::of(&unknown), None);
    }

    #[test]
    fn a_lookup_matches_exactly_one() {
        let l = Lookup::Tags { tags: BTreeMap::from([("Name".into(), "a".into())]), vpc: None };
        assert_eq!(one(&l, "subnet", vec![("subnet-1".to_string(), ())]).unwrap().0, "subnet-1");
        assert_eq!(one::<()>(&l, "subnet", vec![]).unwrap_err(), "no subnet has tags Name=a");
        let two = vec![("subnet-1".to_string(), ()), ("subnet-2".to_string(), ())];
        assert_eq!(
            one(&l, "subnet", two).unwrap_err(),
            "2 subnets have tags Name=a: subnet-1, subnet-2; a lookup must match exactly one"
        );
    }
}

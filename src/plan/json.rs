//! The plan as JSON (`plan --json`, the `plan` event of `apply --json`): a stable shape for
//! pipelines. `action` is [`Action::name`]; a purchase carries its offering, a replace its order.

use serde_json::{Map, Value as Json, json};

use super::{Action, Offer, Plan};
use crate::value::Value;

/// JSON for `plan --json`.
pub fn to_json(plan: &Plan) -> Json {
    let changes: Vec<Json> = plan
        .changes
        .iter()
        .map(|c| {
            let fields: Vec<Json> = c
                .fields
                .iter()
                .map(|f| {
                    json!({
                        "path": f.path,
                        "old": f.old.as_ref().map(Value::to_json),
                        "new": f.new.as_ref().map(planned_json),
                        "forces_replace": f.forces_replace,
                    })
                })
                .collect();
            let mut m = Map::new();
            m.insert("address".into(), c.address.clone().into());
            m.insert("kind".into(), c.kind.into());
            m.insert("action".into(), c.action.name().into());
            if let Some(id) = &c.id {
                m.insert("id".into(), id.clone().into());
            }
            match c.action {
                Action::CreateThenDelete => m.insert("replace_order".into(), "create_before_destroy".into()),
                Action::DeleteThenCreate => m.insert("replace_order".into(), "delete_before_create".into()),
                _ => None,
            };
            if let Some(n) = &c.note {
                m.insert("note".into(), n.clone().into());
            }
            match &c.action {
                Action::Purchase(Offer::Found(p)) => {
                    m.insert("purchase".into(), serde_json::to_value(p).unwrap_or_default());
                }
                Action::Purchase(Offer::Offline(note)) => {
                    m.insert("purchase".into(), json!({"offering_id": null, "looked_up": false, "note": note}));
                }
                Action::Purchase(Offer::NotSearched) => {
                    m.insert("purchase".into(), json!({"offering_id": null, "looked_up": false}));
                }
                Action::Import => {
                    let tags = json!({
                        crate::aws::tags::STACK: plan.stack,
                        crate::aws::tags::ADDRESS: c.address,
                    });
                    m.insert("import".into(), json!({"read": c.adopt.is_some(), "adds_tags": tags}));
                }
                _ => {}
            }
            m.insert("fields".into(), fields.into());
            Json::Object(m)
        })
        .collect();
    // One count per action name, every name present (0 when absent), in a fixed order.
    let mut summary = Map::new();
    for name in
        ["create", "purchase", "update", "replace", "delete", "retain", "adopt", "import", "read", "forget", "render"]
    {
        summary.insert(name.into(), plan.changes.iter().filter(|c| c.action.name() == name).count().into());
    }
    summary.insert("unchanged".into(), plan.unchanged.into());
    // `plan --detailed-exitcode`'s answer: false for a plan of clean imports only.
    summary.insert("changes_anything".into(), plan.changes_anything().into());
    json!({
        "stack": plan.stack,
        "region": plan.region,
        "serial": plan.serial,
        "lineage": plan.lineage,
        "summary": summary,
        "changes": changes,
        "purchases_usd": purchases_usd(plan),
        "warnings": plan.warnings,
    })
}

/// A planned value as JSON: what is not known until apply is the string
/// `"(known after apply)"` where it stands, so a list of unknowns stays a list with one
/// such element per item (as the text plan counts them), and a table keeps its known keys.
pub fn planned_json(v: &Value) -> Json {
    match v {
        Value::Unknown => Json::String(Value::Unknown.to_string()),
        Value::List(l) => Json::Array(l.iter().map(planned_json).collect()),
        Value::Table(t) => Json::Object(t.iter().map(|(k, v)| (k.clone(), planned_json(v))).collect()),
        known => known.to_json(),
    }
}

/// The plan's purchases in USD. Folded from +0.0: an empty `f64` sum is -0.0, which JSON
/// would show as `"purchases_usd": -0.0` for a plan that buys nothing.
fn purchases_usd(plan: &Plan) -> f64 {
    plan.changes.iter().filter_map(|c| c.action.purchase()).fold(0.0, |total, p| total + p.upfront_usd)
}

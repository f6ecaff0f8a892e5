//! `priority_class`: a Kubernetes PriorityClass, rendered (never applied to AWS). Training
//! on reserved capacity preempts preemptible burst work through these (`scheduling.k8s.io/v1`).

use async_trait::async_trait;
use serde_json::json;

use super::{Create, Kind, Manifest, Observed, Recorded, Result, Schema, rendered, str_attr};
use crate::aws::Ctx;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct PriorityClass;

const POLICIES: &[&str] = &["PreemptLowerPriority", "Never"];

static ATTRS: &[Attr] = &[
    Attr::opt("name", Ty::Str, Default::None, OnChange::Update),
    Attr::req("value", Ty::Int, OnChange::Update),
    Attr::opt("preemption_policy", Ty::Enum(POLICIES), Default::Str("PreemptLowerPriority"), OnChange::Update),
    Attr::opt("description", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("global_default", Ty::Bool, Default::Bool(false), OnChange::Update),
];

/// Kubernetes keeps values above one billion for its own classes (system-cluster-critical):
/// a user class must be at most 1,000,000,000 (scheduling/v1 PriorityClass `value`).
const MAX_USER_VALUE: i64 = 1_000_000_000;

impl Schema for PriorityClass {
    fn name(&self) -> &'static str {
        "priority_class"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("name", Ty::Str), ("sha256", Ty::Str)]
    }
}

#[async_trait]
impl Kind for PriorityClass {
    fn actions(&self) -> &'static [&'static str] {
        &[]
    }
    fn rendered(&self) -> bool {
        true
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        if let Some(e) = r.attrs.get("value")
            && let Some(v) = e.as_literal().and_then(Value::as_int)
            && !(-MAX_USER_VALUE..=MAX_USER_VALUE).contains(&v)
        {
            diags.push(
                Diagnostic::error(format!("`{}`: value {v} is outside ±1,000,000,000", r.address), e.span.clone())
                    .help("Kubernetes reserves larger values for its system classes; use at most 1000000000"),
            );
        }
        let (name, span) = match r.attrs.get("name") {
            Some(e) => (e.as_literal().and_then(Value::as_str).map(str::to_string), e.span.clone()),
            None => (Some(r.name.clone()), r.span.clone()),
        };
        if let Some(n) = name.filter(|n| !dns_label(n)) {
            diags.push(
                Diagnostic::error(format!("`{}`: \"{n}\" is not a valid Kubernetes object name", r.address), span)
                    .help("use lowercase letters, digits and '-' (set name = \"...\" if the resource name has '_')"),
            );
        }
    }

    /// Kubernetes refuses to change a PriorityClass's value (the field is immutable).
    fn update_note(&self, old: &Attrs, new: &Attrs, changed: &[String]) -> Option<String> {
        changed.iter().any(|c| c == "value").then(|| {
            format!(
                "Kubernetes cannot change a PriorityClass's value: `kubectl delete priorityclass {}` before applying the new YAML",
                str_attr(old, "name").max(str_attr(new, "name"))
            )
        })
    }

    fn render(&self, address: &str, inputs: &Attrs, _outputs: &Attrs) -> Option<Manifest> {
        let mut doc = json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": { "name": str_attr(inputs, "name"), "labels": rendered::labels(address) },
            "value": inputs.get("value").map(Value::to_json),
            "globalDefault": inputs.get("global_default").map(Value::to_json),
            "preemptionPolicy": str_attr(inputs, "preemption_policy"),
        });
        if let Some(d) = inputs.get("description").and_then(Value::as_str) {
            doc["description"] = json!(d);
        }
        Some(Manifest { file: "priority-classes.yaml".into(), yaml: rendered::yaml_documents(&[doc]) })
    }

    async fn create(&self, _ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let outputs = Attrs::from([("name".to_string(), Value::str(str_attr(req.inputs, "name")))]);
        Ok(rendered::record(self, req.address, req.inputs, outputs))
    }
    async fn read_all(&self, _ctx: &Ctx) -> Result<Vec<Observed>> {
        Ok(vec![])
    }
    async fn update(
        &self,
        ctx: &Ctx,
        address: &str,
        _id: &str,
        _old: &Attrs,
        new: &Attrs,
        _changed: &[String],
    ) -> Result<Recorded> {
        let req = Create { address, inputs: new, token: "", replacing: false, purchase: None, report: &|_| {} };
        self.create(ctx, &req).await
    }
    async fn delete(&self, _ctx: &Ctx, _a: &str, _id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        Ok(())
    }
}

/// An RFC 1123 label: what PriorityClass names (and most Kubernetes names) must be.
pub fn dns_label(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

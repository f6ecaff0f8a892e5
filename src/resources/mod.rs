//! Resource kinds. Each kind is one file implementing [`Kind`]; adding a kind
//! means adding its file and one line in [`KINDS`].

pub mod auto_mode_pool;
pub mod capacity_block;
pub mod capacity_reservation;
mod cidr;
mod cluster_log_group;
pub mod cluster_options;
mod dcgm_exporter;
mod eks_access_entry;
mod eks_addon;
mod eks_cluster;
pub mod existing;
pub mod gpu_nodes;
pub mod gpu_operator;
pub mod hyperpod_cluster;
mod iam_role;
mod image_cache;
pub mod import;
mod import_ec2;
pub mod karpenter_controller;
pub mod karpenter_pool;
pub mod launch_template;
mod nat_gateway;
pub mod node_group;
pub mod offering;
mod oidc_provider;
mod placement_group;
pub mod pod_identity_association;
mod priority_class;
pub mod rendered;
mod security_group;
mod security_group_rule;
mod self_managed_node_group;
mod subnet;
pub mod training_plan;
mod vpc;
mod vpc_endpoint;

pub use subnet::ROUTES_FOR;
pub use vpc::PUBLIC_ROUTES;

use async_trait::async_trait;

use crate::aws::{AwsError, Ctx};
use crate::stack::expr::ExprKind;
pub use crate::stack::schema::Schema;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Expr, Resource};
use crate::value::{Attrs, Value};

/// Every kind, in dependency order: a kind comes after the kinds it can refer to. Objects
/// found by their tags (strays) have no recorded dependencies and are deleted in reverse
/// of this order ([`rank`]). Nothing else depends on the order.
pub static KINDS: &[&'static dyn Kind] = &[
    &vpc::Vpc,
    &subnet::Subnet,
    &nat_gateway::NatGatewayKind,
    &iam_role::IamRole,
    &security_group::SecurityGroup,
    &vpc_endpoint::VpcEndpointKind,
    &placement_group::PlacementGroup,
    &capacity_reservation::CapacityReservationKind,
    &capacity_block::CapacityBlock,
    &training_plan::TrainingPlan,
    &image_cache::ImageCache,
    &eks_cluster::EksCluster,
    // An `iam_role` may trust a provider (IRSA) and so come after it, but a cluster's role
    // comes before the cluster: kinds cannot order that circle. Strays of both are IAM objects
    // with no order between them on delete.
    &oidc_provider::OidcProvider,
    // After eks_cluster: a rule may be on the cluster security group EKS makes.
    &security_group_rule::SecurityGroupRuleKind,
    &eks_addon::EksAddon,
    &pod_identity_association::PodIdentityAssociationKind,
    &eks_access_entry::EksAccessEntry,
    &karpenter_controller::KarpenterController,
    &launch_template::LaunchTemplateKind,
    &node_group::NodeGroup,
    &self_managed_node_group::SelfManagedNodeGroup,
    &karpenter_pool::KarpenterPool,
    &auto_mode_pool::AutoModePool,
    &hyperpod_cluster::HyperpodCluster,
    &priority_class::PriorityClass,
    &gpu_operator::GpuOperator,
    &dcgm_exporter::DcgmExporter,
];

/// Position in [`KINDS`]: a kind may depend on kinds of lower rank, so objects with no
/// recorded dependencies (found by their tags) are deleted from the highest rank down.
pub fn rank(name: &str) -> usize {
    KINDS.iter().position(|k| k.name() == name).unwrap_or(0)
}

pub fn kind(name: &str) -> Option<&'static dyn Kind> {
    KINDS.iter().copied().find(|k| k.name() == name)
}

/// The `tags` attribute every taggable kind accepts.
pub const TAGS: Attr = Attr::opt("tags", Ty::Map(&Ty::Str), Default::EmptyMap, OnChange::Update);

/// AWS's limits on a tag (the same for every service gpustack tags): keys of 1 to 128
/// characters, values of 0 to 256, and no key starting with `aws:` in any case.
const TAG_KEY_CHARS: std::ops::RangeInclusive<usize> = 1..=128;
const TAG_VALUE_CHARS: usize = 256;

/// Checks a `tags` table (`[stack].tags` or a resource's `tags`) against AWS's limits, each
/// problem at the key or value it is about. `what` names the attribute (`stack.tags`).
pub fn check_tags(tags: &Expr, what: &str, diags: &mut Vec<Diagnostic>) {
    // A table written inline has a span per key and value; one from a variable has one span.
    let entries: Vec<(String, Option<Value>, crate::stack::Span, crate::stack::Span)> =
        match (&tags.kind, tags.as_literal()) {
            (ExprKind::Table(t), _) => t
                .iter()
                .map(|(k, e)| {
                    (k.clone(), e.as_literal().cloned(), e.key_span.clone().or(e.span.clone()), e.span.clone())
                })
                .collect(),
            (_, Some(Value::Table(t))) => {
                t.iter().map(|(k, v)| (k.clone(), Some(v.clone()), tags.span.clone(), tags.span.clone())).collect()
            }
            _ => return,
        };
    for (key, value, key_span, value_span) in entries {
        let chars = key.chars().count();
        if !TAG_KEY_CHARS.contains(&chars) {
            diags.push(
                Diagnostic::error(
                    format!("`{what}`: a tag key of {chars} characters is outside AWS's 1 to 128"),
                    key_span.clone(),
                )
                .help("shorten the key; AWS refuses empty keys and keys over 128 characters"),
            );
        }
        if key.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("aws:")) {
            diags.push(
                Diagnostic::error(
                    format!("`{what}`: the tag key \"{key}\" uses the prefix `aws:`, which AWS reserves"),
                    key_span,
                )
                .help("AWS refuses tags whose keys start with aws: (in any case); pick another prefix"),
            );
        }
        if let Some(Value::Str(v)) = value
            && v.chars().count() > TAG_VALUE_CHARS
        {
            diags.push(
                Diagnostic::error(
                    format!("`{what}.{key}`: a tag value of {} characters is over AWS's 256", v.chars().count()),
                    value_span,
                )
                .help("shorten the value to 256 characters or fewer"),
            );
        }
    }
}

/// The kinds as the language sees them (`stack::Stack::parse`).
pub fn schemas() -> Vec<&'static dyn Schema> {
    KINDS.iter().map(|&k| k as &'static dyn Schema).collect()
}

/// The kind of a resource of a parsed stack.
pub fn of(r: &Resource) -> &'static dyn Kind {
    // Invariant: the parser only accepts kinds from `schemas()`, which is `KINDS`.
    kind(r.kind.name()).expect("a parsed resource's kind is in KINDS")
}

/// Offline checks of each kind (`Kind::validate`, on resources whose attributes passed the
/// schema) and those that need the stack around a resource: tags within AWS's limits, zones
/// in the stack's region, and CIDR blocks (VPC and subnet sizes, subnets inside their VPC
/// and apart from each other). Run by the load step in the same pass as the language's.
pub fn check_stack(stack: &crate::stack::Stack, diags: &mut Vec<Diagnostic>) {
    let (resources, region) = (&stack.resources, stack.region.as_str());
    if let Some(tags) = &stack.tags_expr {
        check_tags(tags, "stack.tags", diags);
    }
    for r in resources.iter().filter(|r| r.schema_ok) {
        of(r).validate(r, diags);
    }
    for r in resources.iter().filter(|r| r.values_ok) {
        if let Some(tags) = r.attrs.get("tags") {
            check_tags(tags, &format!("{}.tags", r.address), diags);
        }
        if let Some(e) = r.attrs.get("availability_zone")
            && let Some(Value::Str(zone)) = e.as_literal()
            && !region.is_empty()
            && !zone_in_region(zone, region)
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: availability zone \"{zone}\" is not in the stack's region {region}", r.address),
                    e.span.clone(),
                )
                .help(format!("zones of {region} are named {region}a, {region}b, …; fix the zone or [stack].region")),
            );
        }
    }
    cidr::check(resources, &stack.by_address, diags);
    import::check(stack, diags);
}
/// Edges the stack does not write but AWS needs: a node group waits for its cluster's
/// `vpc-cni` add-on, so the first nodes start with the CNI configuration the stack declares
/// (prefix delegation changes max-pods, which a node computes once when it joins; existing
/// nodes change only when replaced: EKS UG `cni-increase-ip-addresses`). `graph` shows them.
pub fn add_implicit_edges(resources: &mut [Resource]) {
    let cluster_of = |r: &Resource| r.attrs.get("cluster").and_then(|e| e.as_single_ref()).map(|x| x.address.clone());
    let cni: Vec<(usize, String)> = resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind.name() == "eks_addon")
        .filter(|(_, r)| r.attrs.get("addon").and_then(|e| e.as_literal()).and_then(|v| v.as_str()) == Some("vpc-cni"))
        .filter_map(|(i, r)| Some((i, cluster_of(r)?)))
        .collect();
    for r in resources.iter_mut().filter(|r| r.kind.name() == "node_group") {
        let Some(cluster) = cluster_of(r) else { continue };
        for (i, _) in cni.iter().filter(|(_, c)| *c == cluster) {
            if !r.deps.contains(i) {
                r.deps.push(*i);
                r.deps.sort_unstable();
            }
        }
    }
}

/// `us-west-2a` (or a Local Zone such as `us-west-2-lax-1a`) belongs to `us-west-2`.
fn zone_in_region(zone: &str, region: &str) -> bool {
    zone.strip_prefix(region)
        .is_some_and(|rest| (!rest.is_empty() && rest.chars().all(|c| c.is_ascii_lowercase())) || rest.starts_with('-'))
}

/// Kubernetes YAML for `gpustack manifests`: the file it belongs in (relative to `--out`,
/// shared by several resources when they write the same file) and its documents.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub file: String,
    pub yaml: String,
}

/// What a kind's create or update returns: the physical id and the outputs.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub id: String,
    pub outputs: Attrs,
}

/// An object found by refresh.
#[derive(Clone, Debug)]
pub struct Observed {
    /// From the `gpustack:address` tag (or the physical name, for IAM).
    pub address: Option<String>,
    pub id: String,
    /// The inputs as AWS shows them now (a subset of the schema).
    pub attrs: Attrs,
    pub outputs: Attrs,
    /// Let go of by an earlier run (a retained Capacity Block): adopted again if the stack
    /// still declares its address, otherwise ignored rather than deleted as a stray.
    pub retained: bool,
}

/// An object read for `[import]` (`Kind::import`).
#[derive(Clone, Debug)]
pub struct Imported {
    /// `address` is `None`; `attrs` the inputs as AWS shows them; `outputs` as create records them.
    pub observed: Observed,
    /// What AWS shows that the stack language cannot say, as (field, value): `import
    /// generate` writes each as a comment, never drops it silently.
    pub unexpressed: Vec<(String, String)>,
}

/// One create call's arguments.
pub struct Create<'a> {
    pub address: &'a str,
    pub inputs: &'a Attrs,
    /// Unique per attempt; sent as the idempotency token where the API has one.
    pub token: &'a str,
    /// True when this create replaces an object that still exists (create before destroy):
    /// kinds with unique physical names then pick a fresh one.
    pub replacing: bool,
    /// The purchase the approved plan showed (capacity blocks).
    pub purchase: Option<&'a offering::Purchase>,
    /// Reports a step of a long create ("pulling image 2/3: …") to the progress display.
    pub report: &'a (dyn Fn(&str) + Send + Sync),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplaceOrder {
    CreateBeforeDestroy,
    DeleteBeforeCreate,
}

pub type Result<T> = std::result::Result<T, AwsError>;

#[async_trait]
pub trait Kind: Schema {
    /// The AWS API actions this kind calls to plan, apply and destroy (`gpustack policy`).
    /// EC2 tagging (`ec2:CreateTags`, `ec2:DeleteTags`) is added for every EC2 kind.
    fn actions(&self) -> &'static [&'static str];
    fn replace_order(&self) -> ReplaceOrder {
        ReplaceOrder::CreateBeforeDestroy
    }
    /// Attributes that change in place in general but force a replacement for these old and
    /// new inputs (a security-group rule whose source changes from a CIDR to a group).
    fn replaces(&self, _old: &Attrs, _new: &Attrs) -> Vec<&'static str> {
        vec![]
    }
    /// True when a replacement destroys what cannot be got back quickly (a HyperPod cluster:
    /// its instances, their jobs and hours of health checks): the plan refuses to replace
    /// it unless the resource spells out `prevent_destroy = false`.
    fn replace_needs_consent(&self) -> bool {
        false
    }
    /// True when deleting cannot undo the object (a Capacity Block runs until its end
    /// date): removing it *retains* it, and a change that would replace it is refused.
    fn retains_on_delete(&self) -> bool {
        false
    }
    /// True for a kind written as Kubernetes YAML (`gpustack manifests`) instead of applied
    /// to AWS: refresh skips it, its changes plan as `Render`, and create, update and delete
    /// only record it in state (`rendered.rs` has the shared bodies).
    fn rendered(&self) -> bool {
        false
    }
    /// The YAML a rendered kind writes, from its resolved inputs and the outputs its create
    /// recorded (a pinned AMI alias; empty before the first apply).
    fn render(&self, _address: &str, _inputs: &Attrs, _outputs: &Attrs) -> Option<Manifest> {
        None
    }
    /// True when creating spends non-refundable money (a Capacity Block): the plan shows it
    /// as a purchase with its price, and only `--approve-purchases` runs it.
    fn buys(&self) -> bool {
        false
    }
    /// What one purchase of a kind that buys is called in plan text ("Capacity Block").
    fn purchase_noun(&self) -> &'static str {
        "purchase"
    }
    /// For a kind that buys: the offerings matching `inputs` (the resource's attributes, with
    /// `availability_zone` when the plan narrowed the search to one zone), as plans show them.
    async fn offerings(&self, _ctx: &Ctx, _inputs: &Attrs) -> Result<Vec<offering::Purchase>> {
        Ok(vec![])
    }
    /// For a create whose API has no client token: the name the object will get, journaled
    /// as the pending entry's token before the call, so a later run can look exactly that
    /// name up ([`Kind::find_pending`]) instead of trusting a list that may lag.
    fn pending_token(&self, _stack: &str, _address: &str, _purchase: Option<&offering::Purchase>) -> Option<String> {
        None
    }
    /// The object a pending create journaled as `token` ([`Kind::pending_token`]), read
    /// directly by that name; `None` when the kind has no such token or nothing has it.
    async fn find_pending(&self, _ctx: &Ctx, _address: &str, _token: &str) -> Result<Option<Observed>> {
        Ok(None)
    }
    /// For a kind that accepts `existing` (an object the stack does not own): the objects
    /// `lookups` name, in order, each with its id and outputs or why it was not found (none,
    /// or several for a tag lookup). Literal ids are read in one call.
    async fn read_existing(
        &self,
        _ctx: &Ctx,
        lookups: &[existing::Lookup],
    ) -> Result<Vec<std::result::Result<Recorded, String>>> {
        Ok(lookups.iter().map(|_| Err(format!("a {} cannot be read with `existing`", self.name()))).collect())
    }
    /// `[import]`: the id form this kind takes (`"CLUSTER:NODEGROUP"`, `"vpc-…"`), for the
    /// reference docs and error messages; `None` when the kind cannot be imported.
    fn import_id(&self) -> Option<&'static str> {
        None
    }
    /// `[import]` and `gpustack import generate`: the object `id` names (in the
    /// [`Kind::import_id`] form), read without changing anything. Its `attrs` are the inputs
    /// as AWS shows them, every schema attribute AWS can tell, so a file that says the same
    /// plans no update; `None` when nothing has that id.
    async fn import(&self, _ctx: &Ctx, _id: &str) -> Result<Option<Imported>> {
        Ok(None)
    }
    /// Applying an import: puts the `gpustack:stack` and `gpustack:address` tags on the
    /// object (and nothing else), so later runs find it by its tags like one the stack made.
    async fn tag_imported(&self, _ctx: &Ctx, _address: &str, _id: &str, _outputs: &Attrs) -> Result<()> {
        Ok(())
    }
    /// Offline checks beyond the schema.
    fn validate(&self, _r: &Resource, _diags: &mut Vec<Diagnostic>) {}
    /// Defaults that depend on other resources of the stack (what a reference points at),
    /// filled into the resolved inputs before [`Kind::normalize`]: resolved values no longer
    /// say which resource they came from.
    fn stack_defaults(&self, _stack: &crate::stack::Stack, _r: &Resource, _inputs: &mut Attrs) {}
    /// Puts resolved inputs into canonical form (sorted sets and the like) so that
    /// equal meaning compares equal.
    fn normalize(&self, _inputs: &mut Attrs) {}
    /// The recorded inputs as they are now, given what refresh observed.
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        cur.extend(observed.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.normalize(&mut cur);
        cur
    }
    /// Leaves out of the current inputs what the file leaves to AWS (an observed value of an
    /// optional attribute the file does not set: the service CIDR EKS picked), so it is no change.
    fn settle(&self, _current: &mut Attrs, _desired: &Attrs) {}
    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded>;
    /// Every object of this kind tagged for `ctx.stack`: one paged call, not one per resource.
    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>>;
    /// Refusals for an in-place change AWS would reject (a Kubernetes upgrade that skips a
    /// minor version): (attribute, message, help), shown at plan time.
    fn check_update(&self, _old: &Attrs, _new: &Attrs) -> Vec<(&'static str, String, String)> {
        vec![]
    }
    /// What an in-place update will do beyond the field diff, for the plan (a Capacity Block
    /// group drained for its update).
    fn update_note(&self, _old: &Attrs, _new: &Attrs, _changed: &[String]) -> Option<String> {
        None
    }
    /// What deleting the object leaves behind or needs done first, for the plan (an Auto Mode
    /// cluster's EBS volumes).
    fn delete_note(&self, _old: &Attrs) -> Option<String> {
        None
    }
    /// Outputs an in-place update changes (a launch template's `version`): plans treat
    /// them as unknown until the update runs, so dependents see the change.
    fn outputs_changed_by_update(&self) -> &'static [&'static str] {
        &[]
    }
    /// Changes the fields in `changed` in place.
    async fn update(
        &self,
        ctx: &Ctx,
        address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded>;
    /// Deletes the object; an object already gone is success.
    async fn delete(&self, ctx: &Ctx, address: &str, id: &str, inputs: &Attrs, outputs: &Attrs) -> Result<()>;
}

impl Observed {
    /// An object found by its tags (`all`, every tag it has): the `gpustack:address` tag
    /// says which resource it is; `recorded` gives its id and outputs.
    pub fn tagged(all: &std::collections::BTreeMap<String, String>, recorded: Recorded, attrs: Attrs) -> Observed {
        let address = all.get(crate::aws::tags::ADDRESS).cloned();
        Observed { address, id: recorded.id, attrs, outputs: recorded.outputs, retained: false }
    }
}

impl Recorded {
    /// An object whose outputs could not be read back after an update (it is gone): the
    /// id alone, and the next refresh says what became of it.
    pub fn id_only(id: &str) -> Recorded {
        Recorded { id: id.to_string(), outputs: Attrs::new() }
    }
}

/// A string input (the planner has filled defaults and checked types).
pub fn str_attr<'a>(a: &'a Attrs, k: &str) -> &'a str {
    a.get(k).and_then(|v| v.as_str()).unwrap_or_default()
}

/// A list-of-strings input; empty when absent.
pub fn strings_attr(a: &Attrs, k: &str) -> Vec<String> {
    a.get(k)
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// A boolean input; false when absent.
pub fn bool_attr(a: &Attrs, k: &str) -> bool {
    a.get(k).and_then(|v| v.as_bool()).unwrap_or(false)
}

/// An integer input; None when absent.
pub fn int_attr(a: &Attrs, k: &str) -> Option<i64> {
    a.get(k).and_then(|v| v.as_int())
}

/// An integer input as AWS's APIs take it. Validation (`schema::check`) keeps every integer
/// attribute within i32; saturating (never wrapping) only guards a hand-edited state file,
/// so AWS refuses the value instead of acting on a wrapped one.
pub fn i32_of(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review r19-net minor 5: a rule may refer to `${eks_cluster.*.security_group_id}`, so
    /// a stray rule is revoked before a stray cluster is deleted.
    #[test]
    fn security_group_rules_rank_after_what_they_refer_to() {
        for k in ["security_group", "eks_cluster"] {
            assert!(rank("security_group_rule") > rank(k), "{k}");
        }
    }

    #[test]
    fn zones_belong_to_their_region() {
        assert!(zone_in_region("us-west-2a", "us-west-2"));
        assert!(zone_in_region("us-west-2-lax-1a", "us-west-2"));
        assert!(!zone_in_region("us-east-1a", "us-west-2"));
        assert!(!zone_in_region("us-west-2", "us-west-2"));
        assert!(!zone_in_region("us-west-21a", "us-west-2"));
    }

    /// The kinds sit below the rules: a rule may ask a kind, a kind never asks a rule (what
    /// both need lives in the kind, the language or `aws`), so the two never form a circle.
    #[test]
    fn resources_never_import_rules() {
        let found = crate::stack::code_mentions(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/resources"),
            &["rules"],
        );
        assert!(found.is_empty(), "src/resources imports the rules: {found:#?}");
    }
}

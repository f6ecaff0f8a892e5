//! `placement_group`: an EC2 placement group (cluster for EFA training, spread or
//! partition). Names are unique per account and region, so a replace deletes the
//! old group first.

use async_trait::async_trait;
use aws_sdk_ec2::types::{PlacementStrategy, ResourceType};

use super::{
    Create, Imported, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, i32_of, int_attr, str_attr,
};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct PlacementGroup;

const ATTRS: &[Attr] = &[
    Attr::req("strategy", Ty::Enum(&["cluster", "spread", "partition"]), OnChange::Replace),
    Attr::opt("partition_count", Ty::Int, Default::None, OnChange::Replace),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Replace),
    TAGS,
];

impl Schema for PlacementGroup {
    fn name(&self) -> &'static str {
        "placement_group"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("name", Ty::Str), ("id", Ty::Str)]
    }
}

#[async_trait]
impl Kind for PlacementGroup {
    fn actions(&self) -> &'static [&'static str] {
        &["ec2:CreatePlacementGroup", "ec2:DeletePlacementGroup", "ec2:DescribePlacementGroups"]
    }
    fn replace_order(&self) -> ReplaceOrder {
        ReplaceOrder::DeleteBeforeCreate
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        let strategy = r.attrs.get("strategy").and_then(|e| e.as_literal()).and_then(|v| v.as_str());
        if let Some(pc) = r.attrs.get("partition_count") {
            if strategy.is_some_and(|st| st != "partition") {
                diags.push(
                    Diagnostic::error("`partition_count` only applies to strategy \"partition\"", pc.span.clone())
                        .help("remove partition_count, or set strategy = \"partition\""),
                );
            }
            if let Some(n) = pc.as_literal().and_then(|v| v.as_int())
                && !(1..=7).contains(&n)
            {
                diags.push(Diagnostic::error(format!("`partition_count` must be 1 to 7, found {n}"), pc.span.clone()));
            }
        }
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let name = str_attr(req.inputs, "name");
        let mut call = ctx
            .ec2
            .create_placement_group()
            .group_name(name)
            .strategy(PlacementStrategy::from(str_attr(req.inputs, "strategy")))
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::PlacementGroup, req.address, req.inputs));
        if let Some(n) = int_attr(req.inputs, "partition_count") {
            call = call.partition_count(i32_of(n));
        }
        let id = match ctx.call(Service::Ec2, "CreatePlacementGroup", call.send()).await {
            Ok(out) => out.placement_group().and_then(|g| g.group_id()).unwrap_or_default().to_string(),
            // The name is taken: by this very resource (a create that raced a crash) it is adopted.
            Err(e) if e.has_code("InvalidPlacementGroup.Duplicate") => {
                let request = ctx.ec2.describe_placement_groups().group_names(name);
                let found = ctx.call(Service::Ec2, "DescribePlacementGroups", request.send()).await?;
                match found.placement_groups().iter().find(|g| tags::is_ours(ctx, g.tags(), req.address)) {
                    Some(g) => g.group_id().unwrap_or_default().to_string(),
                    None => return Err(e.taken_by_other("set `name` to another name")),
                }
            }
            Err(e) => return Err(e),
        };
        Ok(recorded(id, name.to_string()))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        // DescribePlacementGroups is not paginated: one call returns every match.
        let request = ctx.ec2.describe_placement_groups().filters(tags::stack_filter(ctx));
        let out = ctx.call(Service::Ec2, "DescribePlacementGroups", request.send()).await?;
        Ok(out.placement_groups().iter().map(observe).collect())
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("group name")
    }

    /// `DescribePlacementGroups` by `GroupNames`: an unknown name is the error
    /// `InvalidPlacementGroup.Unknown` (EC2 API reference, error codes), read as nothing found.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let request = ctx.ec2.describe_placement_groups().group_names(id);
        let Some(out) = ctx.call(Service::Ec2, "DescribePlacementGroups", request.send()).await.absent_ok()? else {
            return Ok(None);
        };
        let Some(g) = out.placement_groups().iter().find(|g| g.group_name() == Some(id)) else { return Ok(None) };
        let mut observed = observe(g);
        observed.address = None;
        let mut unexpressed = vec![];
        // A spread group's level (rack or host, for Outposts) has no attribute: kept as it is.
        if let Some(level) = g.spread_level().filter(|l| l.as_str() != "rack") {
            unexpressed.push(("spread_level".to_string(), level.as_str().to_string()));
        }
        Ok(Some(Imported { observed, unexpressed }))
    }

    async fn tag_imported(&self, ctx: &Ctx, address: &str, _id: &str, outputs: &Attrs) -> Result<()> {
        // CreateTags takes the group's id (pg-…), not its name (EC2 API reference `CreateTags`:
        // "Resources: The IDs of the resources").
        super::import::tag_ec2(ctx, str_attr(outputs, "id"), address).await
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        _changed: &[String],
    ) -> Result<Recorded> {
        tags::sync_ec2(ctx, id, old, new).await?;
        Ok(recorded(id.to_string(), str_attr(new, "name").to_string()))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, _id: &str, inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let request = ctx.ec2.delete_placement_group().group_name(str_attr(inputs, "name"));
        ctx.call(Service::Ec2, "DeletePlacementGroup", request.send()).await.absent_ok()?;
        Ok(())
    }
}

/// A placement group as refresh and import see it.
fn observe(g: &aws_sdk_ec2::types::PlacementGroup) -> Observed {
    let all = tags::ec2_map(g.tags());
    let id = g.group_id().unwrap_or_default().to_string();
    let name = g.group_name().unwrap_or_default().to_string();
    let mut attrs = Attrs::from([
        ("strategy".into(), Value::str(g.strategy().map(|x| x.as_str()).unwrap_or_default())),
        ("name".into(), Value::str(name.clone())),
        ("tags".into(), tags::observed(&all)),
    ]);
    if let Some(n) = g.partition_count().filter(|n| *n > 0) {
        attrs.insert("partition_count".into(), Value::Int(n.into()));
    }
    Observed::tagged(&all, recorded(id, name), attrs)
}

fn recorded(id: String, name: String) -> Recorded {
    Recorded { outputs: Attrs::from([("id".into(), Value::str(id.clone())), ("name".into(), Value::str(name))]), id }
}

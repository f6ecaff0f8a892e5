//! What the network kinds share for `[import]` (issue 20): the tag call that makes an
//! imported EC2 object (and the parts of it gpustack manages with it: a VPC's internet
//! gateway and public route table, a subnet's own route table, a NAT gateway's Elastic IP)
//! findable by refresh, and the `Imported` value the kinds return.
//!
//! `CreateTags` takes up to 1000 resource ids of any EC2 type in one call and only adds or
//! overwrites the tags given (EC2 API reference, `CreateTags`: "Adds or overwrites only the
//! specified tags for the specified Amazon EC2 resource or resources"), so tagging never
//! touches the object's own tags or configuration.

use aws_sdk_ec2::types::Tag;

use super::{Imported, Observed, Recorded, Result};
use crate::aws::{Ctx, Service, tags};
use crate::value::Attrs;

/// Puts `gpustack:stack` and `gpustack:address` (and the `marks`, gpustack's own markers such
/// as `gpustack:public-routes`) on every id in `ids`, in one `CreateTags` call.
pub async fn tag(ctx: &Ctx, ids: &[String], address: &str, marks: &[(&str, &str)]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut all = vec![
        Tag::builder().key(tags::STACK).value(&ctx.stack).build(),
        Tag::builder().key(tags::ADDRESS).value(address).build(),
    ];
    all.extend(marks.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()));
    let request = ctx.ec2.create_tags().set_resources(Some(ids.to_vec())).set_tags(Some(all));
    ctx.call(Service::Ec2, "CreateTags", request.send()).await?;
    Ok(())
}

/// An imported object: no address yet, the inputs as AWS shows them, the outputs `create`
/// would have recorded, and what the language cannot say.
pub fn imported(rec: Recorded, attrs: Attrs, unexpressed: Vec<(String, String)>) -> Imported {
    Imported {
        observed: Observed { address: None, id: rec.id, attrs, outputs: rec.outputs, retained: false },
        unexpressed,
    }
}

/// A (field, value) pair for `Imported::unexpressed`.
pub fn note(field: &str, value: impl Into<String>) -> (String, String) {
    (field.to_string(), value.into())
}

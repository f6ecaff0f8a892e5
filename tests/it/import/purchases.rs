//! Importing what costs money: an On-Demand Capacity Reservation, a Capacity Block and a
//! SageMaker training plan made with the SDK. A purchase imported is never searched for,
//! bought, changed or cancelled; destroy retains it.

use super::mutating;
use crate::harness::{Env, block_on};

/// RFC 3339, `days` from now, to the second.
fn in_days(days: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
    t.round(jiff::Unit::Second).unwrap().to_string()
}

fn sdk_time(rfc3339: &str) -> aws_sdk_ec2::primitives::DateTime {
    aws_sdk_ec2::primitives::DateTime::from_secs(rfc3339.parse::<jiff::Timestamp>().unwrap().as_second())
}

const MONEY: [&str; 4] =
    ["PurchaseCapacityBlock", "DescribeCapacityBlockOfferings", "CreateTrainingPlan", "SearchTrainingPlanOfferings"];

#[test]
fn an_odcr_imports_cleanly_and_a_differing_count_updates_it() {
    let env = Env::new();
    let ec2 = env.emu.ec2();
    let end = in_days(30);
    let end_sdk = sdk_time(&end);
    let id = block_on(async move {
        let tag = aws_sdk_ec2::types::Tag::builder().key("team").value("ml").build();
        let spec = aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(aws_sdk_ec2::types::ResourceType::CapacityReservation)
            .tags(tag)
            .build();
        let out = ec2
            .create_capacity_reservation()
            .instance_type("p5.48xlarge")
            .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
            .availability_zone("us-west-2a")
            .instance_count(2)
            .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
            .end_date_type(aws_sdk_ec2::types::EndDateType::Limited)
            .end_date(end_sdk)
            .tag_specifications(spec)
            .send()
            .await
            .unwrap();
        out.capacity_reservation().unwrap().capacity_reservation_id().unwrap().to_string()
    });
    let stack = |count: u32| {
        format!(
            r#"[stack]
name   = "odcr"
region = "us-west-2"

[capacity_reservation.gpu]
instance_type     = "p5.48xlarge"
availability_zone = "us-west-2a"
instance_count    = {count}
end_date          = "{end}"
tags              = {{ team = "ml" }}

[import]
"capacity_reservation.gpu" = "{id}"
"#
        )
    };
    env.write("s.toml", &stack(2));
    env.emu.reset_requests();
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(plan.stdout.contains(&format!("import {id} (record in state")), "{plan:?}");
    assert!(mutating(&env.emu.requests()).is_empty(), "plan only reads");

    env.write("s.toml", &stack(3));
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("instance_count: 2 → 3"), "{plan:?}");
    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(
        mutating(&env.emu.requests()),
        vec!["CreateTags".to_string(), "ModifyCapacityReservation".to_string()],
        "tagged, then the one field updated"
    );
    let ec2 = env.emu.ec2();
    let id2 = id.clone();
    let count = block_on(async move {
        let out = ec2.describe_capacity_reservations().capacity_reservation_ids(id2).send().await.unwrap();
        out.capacity_reservations()[0].total_instance_count().unwrap()
    });
    assert_eq!(count, 3);
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");

    // An ODCR is not a Capacity Block: importing it as one says what it is.
    let wrong = stack(3).replace("[capacity_reservation.gpu]", "[capacity_block.gpu]").replace(
        "instance_count    = 3",
        "instance_count = 3\nduration_hours = 24\nstart_after = \"2026-12-01T00:00:00Z\"\nstart_before = \"2026-12-02T00:00:00Z\"\nmax_upfront_usd = 1",
    );
    let wrong =
        wrong.replace("end_date", "# end_date").replace("\"capacity_reservation.gpu\"", "\"capacity_block.gpu\"");
    env.write("w.toml", &wrong.replace("name   = \"odcr\"", "name   = \"odcrw\""));
    let refused = env.run(&["plan", "w.toml"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains(&format!(
            "{id} is an On-Demand Capacity Reservation, not a Capacity Block: import it as a capacity_reservation"
        )),
        "{refused:?}"
    );
}

/// A Capacity Block bought by hand: imported without a search or a purchase, a change to it is
/// refused, and destroy retains it.
#[test]
fn a_capacity_block_is_imported_never_bought_never_changed_and_retained() {
    let env = Env::new();
    let (after, before) = (in_days(1), in_days(6));
    let ec2 = env.emu.ec2();
    let (from, to) = (sdk_time(&after), sdk_time(&in_days(7)));
    let latest = before.parse::<jiff::Timestamp>().unwrap().as_second();
    let id = block_on(async move {
        let offers = ec2
            .describe_capacity_block_offerings()
            .instance_type("p5.48xlarge")
            .instance_count(1)
            .capacity_duration_hours(24)
            .start_date_range(from)
            .end_date_range(to)
            .send()
            .await
            .unwrap();
        let o = offers
            .capacity_block_offerings()
            .iter()
            .find(|o| o.capacity_block_duration_hours() == Some(24) && o.start_date().unwrap().secs() <= latest)
            .expect("an offering of 24 hours in the window");
        let out = ec2
            .purchase_capacity_block()
            .capacity_block_offering_id(o.capacity_block_offering_id().unwrap())
            .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
            .send()
            .await
            .unwrap();
        out.capacity_reservation().unwrap().capacity_reservation_id().unwrap().to_string()
    });
    assert_eq!(env.emu.purchases(), 1);
    let stack = |count: u32| {
        format!(
            r#"[stack]
name   = "cbimp"
region = "us-west-2"

[capacity_block.train]
instance_type   = "p5.48xlarge"
instance_count  = {count}
duration_hours  = 24
start_after     = "{after}"
start_before    = "{before}"
max_upfront_usd = 1
prevent_destroy = true

[import]
"capacity_block.train" = "{id}"
"#
        )
    };
    env.write("s.toml", &stack(1));
    env.emu.reset_requests();
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "a clean import, max_upfront_usd guards nothing here:\n{plan:?}");
    assert!(plan.stdout.contains(&"= capacity_block.train".to_string()), "{plan:?}");
    assert!(!plan.stdout.contains("purchase"), "never shown as a purchase: {plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let calls = env.emu.requests();
    assert!(calls.iter().all(|(_, a)| !MONEY.contains(&a.as_str())), "no search, no purchase: {calls:?}");
    assert_eq!(mutating(&calls), vec!["CreateTags".to_string()]);
    assert_eq!(env.emu.purchases(), 1, "never bought again");

    // A bought block cannot change: refused at plan time, nothing called.
    env.write("s.toml", &stack(2));
    let refused = env.run(&["plan", "s.toml"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains(&format!("`capacity_block.train` ({id}) was bought and cannot change: instance_count")),
        "{refused:?}"
    );

    env.write("s.toml", &stack(1));
    env.emu.reset_requests();
    // prevent_destroy = true (what `import generate` writes on purchases) does not refuse
    // destroy: nothing is destroyed, the block is retained (integrator decision).
    let gone = env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert!(gone.stdout.contains("retain"), "{gone:?}");
    let calls = env.emu.requests();
    assert!(!calls.iter().any(|(_, a)| a == "CancelCapacityReservation"), "a block is never cancelled: {calls:?}");
    let ec2 = env.emu.ec2();
    let state = block_on(async move {
        let out = ec2.describe_capacity_reservations().capacity_reservation_ids(id).send().await.unwrap();
        out.capacity_reservations()[0].state().unwrap().as_str().to_string()
    });
    assert_eq!(state, "scheduled", "retained as it was");
}

/// A training plan bought by hand (any name): imported by name, found again by its tags on
/// the next refresh, never searched for or bought.
#[test]
fn a_training_plan_is_imported_by_name_and_found_by_its_tags_afterwards() {
    let env = Env::new();
    let (after, before) = (in_days(1), in_days(6));
    let sm = env.emu.sagemaker();
    let (from, to) = (
        aws_sdk_sagemaker::primitives::DateTime::from_secs(after.parse::<jiff::Timestamp>().unwrap().as_second()),
        aws_sdk_sagemaker::primitives::DateTime::from_secs(in_days(9).parse::<jiff::Timestamp>().unwrap().as_second()),
    );
    let latest = before.parse::<jiff::Timestamp>().unwrap().as_second();
    let arn = block_on(async move {
        let offers = sm
            .search_training_plan_offerings()
            .instance_type(aws_sdk_sagemaker::types::ReservedCapacityInstanceType::MlP548Xlarge)
            .instance_count(2)
            .duration_hours(48)
            .start_time_after(from)
            .end_time_before(to)
            .target_resources(aws_sdk_sagemaker::types::SageMakerResourceName::HyperpodCluster)
            .send()
            .await
            .unwrap();
        let o = offers
            .training_plan_offerings()
            .iter()
            .find(|o| {
                o.duration_hours() == Some(48)
                    && o.reserved_capacity_offerings().len() == 1
                    && o.reserved_capacity_offerings()[0].start_time().is_some_and(|s| s.secs() <= latest)
            })
            .expect("a one-block 48-hour offering in the window");
        let out = sm
            .create_training_plan()
            .training_plan_name("team-baseline")
            .training_plan_offering_id(o.training_plan_offering_id().unwrap())
            .send()
            .await
            .unwrap();
        out.training_plan_arn().unwrap().to_string()
    });
    assert_eq!(env.emu.training_plan_purchases(), 1);
    env.write(
        "s.toml",
        &format!(
            r#"[stack]
name   = "tpimp"
region = "us-west-2"

[training_plan.base]
instance_type   = "ml.p5.48xlarge"
instance_count  = 2
duration_hours  = 48
start_after     = "{after}"
start_before    = "{before}"
max_upfront_usd = 1

[import]
"training_plan.base" = "team-baseline"
"#
        ),
    );
    env.emu.reset_requests();
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(plan.stdout.contains(&format!("import {arn}")), "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let calls = env.emu.requests();
    assert!(calls.iter().all(|(_, a)| !MONEY.contains(&a.as_str())), "no search, no purchase: {calls:?}");
    assert_eq!(mutating(&calls), vec!["AddTags".to_string()]);
    assert_eq!(env.emu.training_plan_purchases(), 1, "never bought again");
    assert_eq!(env.state("tpimp")["resources"]["training_plan.base"]["id"], arn.as_str());
    // Refreshed by its tags (its name is not the stack's): still in state, nothing to do.
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("No changes."), "{again:?}");
}

//! The Kubernetes versions EKS offers for a new cluster, offline: an embedded copy of EKS's
//! release calendar, compared with today's date. A version past its end of extended
//! support can no longer be created ("On the end of extended support date, you can no
//! longer create new Amazon EKS clusters with the unsupported version": EKS UG
//! `kubernetes-versions`, "Amazon EKS extended support FAQs"), and a version newer than
//! EKS could have released by today does not exist yet. A version newer than the table
//! but possibly released since is left to EKS (the table ages; `DescribeClusterVersions`
//! is the live answer).
//!
//! The refusal is about creating a cluster only: "Existing control planes are automatically
//! updated by Amazon EKS to the earliest supported version" (same page), so a cluster that
//! already runs keeps running and billing, and must stay plannable and destroyable. The
//! check therefore runs where the cluster is known to be created: `validate` (a file read as
//! a new stack) and `plan`/`apply` for a cluster the plan creates; never in the load step
//! every command shares, so `destroy` never sees it.

use jiff::civil::{Date, date};

use super::lit_str;
use crate::aws::eks::minor;
use crate::stack::{Diagnostic, Stack};

/// One row of the calendar: the minor version, when EKS released it, and when its
/// extended support ends (UTC dates; `DescribeClusterVersions.endOfExtendedSupportDate`
/// is midnight UTC of that day).
struct Release {
    minor: u32,
    released: Date,
    end_of_extended: Date,
}

/// "Amazon EKS Kubernetes release calendar", awsdocs/amazon-eks-user-guide
/// `latest/ug/versioning/kubernetes-versions.adoc` @0138560 (1.29–1.34). 1.35 from AWS's
/// aws-samples/sample-apex-skills `eks-operation-review/references/cluster-lifecycle.md`
/// (checked against the EKS calendar on 2026-04-24): end of standard support 2027-03-27,
/// extended 2028-03-27; released on EKS 2026-01-27.
const CALENDAR: &[Release] = &[
    Release { minor: 29, released: date(2024, 1, 23), end_of_extended: date(2026, 3, 23) },
    Release { minor: 30, released: date(2024, 5, 23), end_of_extended: date(2026, 7, 23) },
    Release { minor: 31, released: date(2024, 9, 26), end_of_extended: date(2026, 11, 26) },
    Release { minor: 32, released: date(2025, 1, 23), end_of_extended: date(2027, 3, 23) },
    Release { minor: 33, released: date(2025, 5, 29), end_of_extended: date(2027, 7, 29) },
    Release { minor: 34, released: date(2025, 10, 2), end_of_extended: date(2027, 12, 2) },
    Release { minor: 35, released: date(2026, 1, 27), end_of_extended: date(2028, 3, 27) },
];

/// Kubernetes ships a minor version about every four months (EKS UG `kubernetes-versions`:
/// "on average once every four months"); a version more than one per three months past the
/// newest in the table cannot have reached EKS by today.
const FASTEST_CADENCE_MONTHS: i32 = 3;

/// What EKS says of a version on `today`.
#[derive(Debug, PartialEq)]
enum Offer {
    Offered,
    /// Past its end of extended support (that date; None for a version older than the table).
    Ended(Option<Date>),
    /// Newer than EKS can have released.
    NotYet,
}

fn offer(version: (u32, u32), today: Date) -> Offer {
    // CALENDAR is a non-empty constant, oldest first.
    let (oldest, newest) = (&CALENDAR[0], &CALENDAR[CALENDAR.len() - 1]);
    match version.0 {
        0 => return Offer::Ended(None),
        1 => {}
        _ => return Offer::NotYet,
    }
    if let Some(r) = CALENDAR.iter().find(|r| r.minor == version.1) {
        return if today >= r.end_of_extended { Offer::Ended(Some(r.end_of_extended)) } else { Offer::Offered };
    }
    if version.1 < oldest.minor {
        return Offer::Ended(None);
    }
    let months = (i32::from(today.year()) - i32::from(newest.released.year())) * 12 + i32::from(today.month())
        - i32::from(newest.released.month());
    let possible = i64::from(newest.minor) + i64::from(months.max(0) / FASTEST_CADENCE_MONTHS);
    if i64::from(version.1) > possible { Offer::NotYet } else { Offer::Offered }
}

/// "1.32, 1.33, 1.34, 1.35": the table's versions EKS still offers on `today`.
fn offered(today: Date) -> String {
    CALENDAR
        .iter()
        .filter(|r| today < r.end_of_extended)
        .map(|r| format!("1.{}", r.minor))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Each `eks_cluster` to be created (`creates` its address) whose `version` EKS does not
/// offer for a new cluster on `today`.
pub(super) fn check(stack: &Stack, today: Date, creates: &dyn Fn(&str) -> bool) -> Vec<Diagnostic> {
    let mut d = vec![];
    for c in stack.resources.iter().filter(|r| r.kind.name() == "eks_cluster" && creates(&r.address)) {
        let Some(v) = lit_str(c, "version") else { continue };
        let Some(parsed) = minor(&v) else { continue };
        let at = super::span(c, "version");
        let list = offered(today);
        match offer(parsed, today) {
            Offer::Offered => {}
            Offer::Ended(end) => d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: EKS no longer offers Kubernetes {v}: its extended support ended{}",
                        c.address,
                        end.map(|e| format!(" on {e}")).unwrap_or_default()
                    ),
                    at,
                )
                .help(format!(
                    "EKS creates clusters on {list} (its release calendar); set version to one of them, upgrading an existing cluster one minor version at a time"
                )),
            ),
            Offer::NotYet => d.push(
                Diagnostic::error(format!("`{}`: EKS does not offer Kubernetes {v} yet", c.address), at).help(
                    format!("EKS creates clusters on {list} (its release calendar), and on newer versions once released"),
                ),
            ),
        }
    }
    d
}

/// The last Kubernetes minor version EKS publishes Amazon Linux 2 AMIs for:
/// awslabs/amazon-eks-ami#2545, "As of November 26, 2025, the Amazon Linux 2 (AL2)
/// EKS-optimized Amazon Machine Images (AMIs) have reached end of support. We will release
/// the final official AL2-based AMIs in the week starting 12/8/2025" (it points to the EKS
/// UG "EKS AMI Deprecation FAQs"); 1.32 is the last minor with AL2 AMIs (the emulator's
/// catalog, `AL2_LAST_VERSION = "1.32"`, and docs/research-issue18-accepted-silently.md).
const AL2_LAST_MINOR: u32 = 32;

/// Each node group `changes` says is created or changed whose `AL2_*` ami_type has no AMI
/// for its cluster's Kubernetes version: EKS would reject CreateNodegroup (or the version
/// update) after the cluster is built.
pub(super) fn al2_node_groups(stack: &Stack, changes: &dyn Fn(&str) -> bool) -> Vec<Diagnostic> {
    let mut d = vec![];
    for ng in super::node_groups(stack).filter(|ng| changes(&ng.address)) {
        let Some(ami) = lit_str(ng, "ami_type").filter(|a| a.starts_with("AL2_")) else { continue };
        let Some(cluster) = super::target(stack, ng, "cluster") else { continue };
        let Some(v) = lit_str(cluster, "version") else { continue };
        let Some((1, m)) = minor(&v) else { continue };
        if m > AL2_LAST_MINOR {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: {ami} is an Amazon Linux 2 AMI, and EKS publishes none for Kubernetes {v} (`{}`): AL2 AMIs stop at 1.{AL2_LAST_MINOR}",
                        ng.address, cluster.address
                    ),
                    super::span(ng, "ami_type"),
                )
                .help(format!(
                    "use ami_type = \"{}\" (AL2023) or \"auto\" (Bottlerocket)",
                    crate::resources::node_group::al2023_ami_type(&ami)
                )),
            );
        }
    }
    d
}

/// Today's date in UTC, the time zone of EKS's calendar.
pub(super) fn today() -> Date {
    jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_offered_until_its_end_of_extended_support() {
        let today = date(2026, 11, 26);
        assert_eq!(offer((1, 31), date(2026, 11, 25)), Offer::Offered);
        assert_eq!(offer((1, 31), today), Offer::Ended(Some(date(2026, 11, 26))));
        assert_eq!(offer((1, 30), today), Offer::Ended(Some(date(2026, 7, 23))));
        assert_eq!(offer((1, 24), today), Offer::Ended(None));
        for v in 32..=35 {
            assert_eq!(offer((1, v), today), Offer::Offered, "1.{v}");
        }
        assert_eq!(offered(today), "1.32, 1.33, 1.34, 1.35");
    }

    #[test]
    fn a_version_newer_than_eks_can_have_released_is_not_offered_yet() {
        let today = date(2026, 11, 26);
        // Ten months after 1.35: at most three more minors can exist.
        assert_eq!(offer((1, 38), today), Offer::Offered);
        assert_eq!(offer((1, 39), today), Offer::NotYet);
        assert_eq!(offer((1, 36), date(2026, 2, 1)), Offer::NotYet);
        assert_eq!(offer((2, 0), today), Offer::NotYet);
        assert_eq!(offer((0, 9), today), Offer::Ended(None));
    }
}

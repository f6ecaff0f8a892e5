//! Why an operation of an apply or destroy failed, kept typed: the text people read,
//! and for a failed AWS call its service, operation, error code and message, which
//! `--json` events carry as fields (a pipeline can tell `UnauthorizedOperation` from
//! `InsufficientInstanceCapacity` without parsing text).

use crate::aws::AwsError;

/// A failed AWS call's parts.
#[derive(Clone, Debug, PartialEq)]
pub struct AwsFailure {
    /// The IAM service prefix: "ec2", "iam", "eks", "ssm", "servicequotas", "s3".
    pub service: &'static str,
    pub operation: &'static str,
    pub error_code: Option<String>,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// One line for people ("CreateVpc failed: InvalidVpc.Range: …").
    pub text: String,
    /// Set when an AWS call failed.
    pub aws: Option<AwsFailure>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<AwsError> for Failure {
    fn from(e: AwsError) -> Failure {
        let aws = AwsFailure {
            service: service_of(e.operation),
            operation: e.operation,
            error_code: e.code.clone(),
            message: e.message().to_string(),
        };
        Failure { text: e.to_string(), aws: Some(aws) }
    }
}

impl From<String> for Failure {
    fn from(text: String) -> Failure {
        Failure { text, aws: None }
    }
}

impl From<&str> for Failure {
    fn from(text: &str) -> Failure {
        Failure { text: text.to_string(), aws: None }
    }
}

impl Failure {
    /// For `--json`: `error` (the text), plus `service`, `operation`, `error_code` and
    /// `message` for a failed AWS call.
    pub fn json_fields(&self, into: &mut serde_json::Map<String, serde_json::Value>) {
        into.insert("error".into(), self.text.clone().into());
        if let Some(a) = &self.aws {
            into.insert("service".into(), a.service.into());
            into.insert("operation".into(), a.operation.into());
            into.insert("error_code".into(), a.error_code.clone().into());
            into.insert("message".into(), a.message.clone().into());
        }
    }
}

/// The service of an operation, from the IAM actions the kinds declare (`Kind::actions`,
/// the list `gpustack policy` prints and the tests check every call against). "aws" for an
/// operation no kind declares.
pub fn service_of(operation: &str) -> &'static str {
    crate::resources::KINDS
        .iter()
        .flat_map(|k| k.actions().iter())
        .find_map(|a| a.split_once(':').filter(|(_, op)| *op == operation).map(|(service, _)| service))
        .unwrap_or("aws")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_errors_keep_their_parts_and_services_come_from_the_kinds_actions() {
        let e = AwsError {
            operation: "CreateVpc",
            code: Some("InvalidVpc.Range".into()),
            detail: "InvalidVpc.Range: The CIDR '10.0.0.0/8' is invalid.".into(),
        };
        let f = Failure::from(e);
        assert_eq!(f.text, "CreateVpc failed: InvalidVpc.Range: The CIDR '10.0.0.0/8' is invalid.");
        let a = f.aws.unwrap();
        assert_eq!((a.service, a.operation, a.error_code.as_deref()), ("ec2", "CreateVpc", Some("InvalidVpc.Range")));
        assert_eq!(a.message, "The CIDR '10.0.0.0/8' is invalid.");
        assert_eq!(service_of("CreateRole"), "iam");
        assert_eq!(service_of("CreateNodegroup"), "eks");
        assert_eq!(service_of("PurchaseCapacityBlock"), "ec2");
        assert_eq!(service_of("NoSuchCall"), "aws");
    }
}

//! [`ProtoError`]: why a Nacos request's parameters were rejected.
//!
//! This module owns the error texts. Each variant's `Display` is exactly the plain-text
//! body Nacos 1.4 answers for the same mistake (where Nacos has one), so clients that
//! match on error strings keep working; [`ProtoError::status`] gives the HTTP status.
//! Variants with no Nacos counterpart (size bounds, encoding errors) say so in their docs.

/// A request parameter was missing, malformed or out of bounds.
///
/// Kept small (at most a boxed echo of the offending input) because parse errors are
/// produced on the request path; the boxed text is only allocated when an error occurs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// A required parameter is absent or blank. Fix: send `<name>` with a value.
    #[error("Param '{0}' is required.")]
    Required(&'static str),
    /// A parameter a Nacos form requires is absent (`NamespaceForm.validate`'s
    /// own text, not Spring's). Fix: send `<name>`.
    #[error("required parameter '{0}' is missing")]
    FormMissing(&'static str),
    /// A grouped service name without a service part (`G@@`, `@@`). Fix: send
    /// `groupName@@serviceName`, or an ungrouped name plus `groupName`.
    #[error("Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'")]
    ServiceNameFormat,
    /// A grouped service name with an empty group (`@@svc`). Fix: name the group.
    #[error("Param 'serviceName' is illegal, groupName can't be empty")]
    GroupNameEmpty,
    /// The grouped service name has characters outside `[0-9a-zA-Z@.:_-]`; carries the
    /// grouped name. Fix: rename the service or group.
    #[error("dom name can only have these characters: 0-9a-zA-Z-._:, current: {0}")]
    ServiceNameSyntax(Box<str>),
    /// The cluster name has characters outside `[0-9a-zA-Z-]`; carries the name.
    #[error("cluster name can only have these characters: 0-9a-zA-Z-, current: {0}")]
    ClusterNameSyntax(Box<str>),
    /// A value is longer than the configured bound (our own limit; Nacos has none).
    /// Fix: shorten it or raise the matching [`crate::naming::ParseLimits`] field.
    #[error("Param '{param}' is too long: {len} bytes, the limit is {max}")]
    TooLong {
        /// The parameter name.
        param: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// `ip` is digits and dots but not a valid IPv4 address, or has characters no
    /// host name or IPv6 literal can have. Fix: send a valid address.
    #[error("instance format invalid: Your IP address is spelled incorrectly")]
    InvalidIp,
    /// `weight` is NaN or outside `[0, 10000]`.
    #[error("instance format invalid: The weights range from 0.0 to 10000.0")]
    WeightRange,
    /// A number parameter does not parse, as Java's `NumberFormatException` says it;
    /// carries the input. Fix: send a decimal number.
    #[error("For input string: \"{0}\"")]
    NumberFormat(Box<str>),
    /// An integer parameter parsed but is outside its range (our own text; Nacos does
    /// not range-check ports). Fix: send a value in `min..=max`.
    #[error("Param '{param}' is illegal, it should be between {min} and {max}, current: {value}")]
    OutOfRange {
        /// The parameter name.
        param: &'static str,
        /// The parsed value.
        value: i64,
        /// Smallest accepted value.
        min: i32,
        /// Largest accepted value.
        max: i32,
    },
    /// `metadata` is neither a JSON object of scalars nor `k=v,k=v`; carries the input.
    #[error("metadata format incorrect:{0}")]
    MetadataFormat(Box<str>),
    /// `metadata` has more entries than allowed (our own limit).
    #[error("metadata has too many entries: {len}, the limit is {max}")]
    MetadataEntries {
        /// Entries in the input.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The `beat` parameter is not a JSON object of the beat shape; carries the reason.
    /// (Nacos answers 500 with a Jackson trace here; we answer 400.)
    #[error("Param 'beat' is illegal: {0}")]
    BeatFormat(Box<str>),
    /// A `selector` has a `type` other than `none` or `label`.
    #[error("not match any type of selector!")]
    SelectorType,
    /// A `selector` is not a JSON object with a string `type` (and, for `label`, a
    /// string `expression`); carries the input.
    #[error("selector format incorrect:{0}")]
    SelectorFormat(Box<str>),
    /// `instances` of a metadata batch is not a JSON list of `{ip, port, clusterName}`;
    /// carries the reason. (Nacos ignores it and changes every instance; we refuse.)
    #[error("Param 'instances' is illegal: {0}")]
    BatchInstances(Box<str>),
    /// A `%` not followed by two hex digits in the query string or form body.
    #[error("request parameters have an invalid percent-encoding")]
    PercentEncoding,
    /// Percent-decoded parameter bytes are not UTF-8 (`%ff`).
    #[error("request parameters are not valid UTF-8")]
    Utf8,
}

impl ProtoError {
    /// The HTTP status to answer with. Every parameter error is a client error (400),
    /// as Nacos maps `IllegalArgumentException` and `INVALID_PARAM`.
    pub fn status(&self) -> u16 {
        400
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_nacos() {
        assert_eq!(
            ProtoError::Required("serviceName").to_string(),
            "Param 'serviceName' is required."
        );
        assert_eq!(
            ProtoError::ServiceNameSyntax("DEFAULT_GROUP@@a b".into()).to_string(),
            "dom name can only have these characters: 0-9a-zA-Z-._:, current: DEFAULT_GROUP@@a b"
        );
        assert_eq!(
            ProtoError::NumberFormat("abc".into()).to_string(),
            "For input string: \"abc\""
        );
        assert_eq!(
            ProtoError::MetadataFormat("x".into()).to_string(),
            "metadata format incorrect:x"
        );
        assert_eq!(ProtoError::InvalidIp.status(), 400);
    }

    #[test]
    fn error_stays_small() {
        assert!(std::mem::size_of::<ProtoError>() <= 40);
    }
}

//! Nacos's parameter checker: the servlet filter that refuses an illegal
//! name, address or port of a v2/v3 naming request with a plain-text 400
//! before any controller runs.
//!
//! Nacos 3 (`core/paramcheck/ParamCheckerFilter.java`, on by default:
//! `nacos.core.param.check.enabled`) asks the extractor a controller names
//! (`@ExtractorManager.Extractor`) for the request's parameters and the
//! default checker (`common/paramcheck/DefaultParamChecker.java`, rules in
//! `ParamCheckRule.java`) for a verdict; a refusal is HTTP 400 whose body is
//! the message and a CRLF (`generate400Response`, `println`). The naming
//! extractors (`naming/paramcheck/*HttpParamExtractor.java`) differ in what
//! they read: [`Extractor`].
//!
//! Java's rules are kept exactly: blank values are not checked
//! (`StringUtils.isBlank`), lengths are UTF-16 units (`String.length`),
//! the patterns' `\s` is ASCII whitespace and `.` any character but a
//! line terminator. Where an extractor itself fails in Nacos (metadata,
//! a beat or an instance list that does not parse), that part is left to
//! the controller, which refuses it in its own words.

use std::borrow::Cow;

use crate::naming::metadata::Metadata;
use crate::naming::route::Route;
use crate::naming::{parse_java_int, ParseLimits, GROUP_SEPARATOR};
use crate::params::Params;

/// Which of Nacos's naming extractors reads a route's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extractor {
    /// `NamingDefaultHttpParamExtractor`: `ip`, `port` (else `checkPort`),
    /// `namespaceId`, `clusterName` (else `cluster`), `serviceName` (else
    /// `serviceNameParam`), `groupName` (else `groupNameParam`), `metadata`.
    Default,
    /// `NamingInstanceListHttpParamExtractor`: the service, `namespaceId`
    /// and the `clusters` list (a list's `clusterName` is not checked).
    InstanceList,
    /// `NamingInstanceBeatHttpParamExtractor`: the service, `ip`, `port`,
    /// `namespaceId`, and the `beat` JSON's ip, port and cluster.
    Beat,
    /// `NamingInstanceMetadataBatchHttpParamExtractor`: the service,
    /// `namespaceId`, `metadata`, and each of `instances`' ip, port and
    /// cluster.
    MetadataBatch,
}

/// The extractor Nacos 3's controller for `route` names; `None` for routes
/// the filter lets through unchecked (namespaces, logins, the 1.x door,
/// which serves 1.x clients as Nacos 1.x did, without the filter).
pub fn extractor(route: Route) -> Option<Extractor> {
    use Route as R;
    // The annotations: per method on the list, beat and metadata-batch
    // mappings, per class elsewhere (InstanceControllerV2/V3,
    // InstanceOpenApiController, ServiceControllerV2/V3, HealthControllerV2/V3,
    // OperatorControllerV2/V3, ClientInfoControllerV2, ClientControllerV3,
    // ClusterControllerV3, CatalogControllerV2).
    Some(match route {
        R::V2InstanceList | R::V3ClientList | R::V3InstanceList => Extractor::InstanceList,
        R::V2InstanceBeat => Extractor::Beat,
        R::V2MetadataBatchUpdate
        | R::V2MetadataBatchDelete
        | R::V3MetadataBatchUpdate
        | R::V3MetadataBatchDelete => Extractor::MetadataBatch,
        R::V2InstanceRegister
        | R::V2InstanceDeregister
        | R::V2InstanceUpdate
        | R::V2InstancePatch
        | R::V2InstanceDetail
        | R::V2InstanceStatuses
        | R::V2ServiceCreate
        | R::V2ServiceDelete
        | R::V2ServiceUpdate
        | R::V2ServiceDetail
        | R::V2ServiceList
        | R::V2HealthUpdate
        | R::V2Switches
        | R::V2SwitchesUpdate
        | R::V2Metrics
        | R::V2ClientList
        | R::V2ClientDetail
        | R::V2ClientPublished
        | R::V2ClientSubscribed
        | R::V2ServicePublishers
        | R::V2ServiceSubscriberClients
        | R::V3ClientRegister
        | R::V3ClientDeregister
        | R::V3InstanceRegister
        | R::V3InstanceDeregister
        | R::V3InstanceUpdate
        | R::V3InstanceDetail
        | R::V3InstancePartial
        | R::V3ServiceCreate
        | R::V3ServiceDelete
        | R::V3ServiceUpdate
        | R::V3ServiceDetail
        | R::V3ServiceList
        | R::V3ServiceSubscribers
        | R::V3SelectorTypes
        | R::V3HealthUpdate
        | R::V3HealthCheckers
        | R::V3Switches
        | R::V3SwitchesUpdate
        | R::V3Metrics
        | R::V3OpsLog
        | R::V3ClientListAdmin
        | R::V3ClientDetail
        | R::V3ClientPublished
        | R::V3ClientSubscribed
        | R::V3ServicePublishers
        | R::V3ServiceSubscriberClients
        | R::V3ClientDistro
        | R::V3ClusterUpdate => Extractor::Default,
        _ => return None,
    })
}

/// One `ParamInfo`: what an extractor read, `None` where it read nothing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct ParamInfo<'a> {
    namespace_id: Option<&'a str>,
    service_name: Option<&'a str>,
    group: Option<&'a str>,
    clusters: Option<&'a str>,
    // Borrowed from the parameters; owned when read from a beat's or a
    // batch's JSON.
    cluster: Option<Cow<'a, str>>,
    ip: Option<Cow<'a, str>>,
    port: Option<Cow<'a, str>>,
    metadata: Option<Metadata>,
}

/// Checks `params` as `extractor` reads them: `Err` with Nacos's message
/// (without the CRLF the filter appends) for the first illegal value.
pub fn check(extractor: Extractor, params: &Params<'_>) -> Result<(), String> {
    let (first, more) = extract(extractor, params);
    check_info(&first)?;
    more.iter().try_for_each(check_info)
}

/// The `ParamInfo`s of a request, in the extractor's order: the request's
/// own, then those of a beat's or a batch's JSON (none, unallocated, for
/// the other extractors).
fn extract<'a>(
    extractor: Extractor,
    params: &'a Params<'_>,
) -> (ParamInfo<'a>, Vec<ParamInfo<'a>>) {
    let mut info = ParamInfo {
        namespace_id: params.get("namespaceId"),
        ..ParamInfo::default()
    };
    let (mut service, mut group) = (params.get("serviceName"), params.get("groupName"));
    if extractor == Extractor::Default {
        service = or_alias(params, service, "serviceNameParam");
        group = or_alias(params, group, "groupNameParam");
    }
    // `serviceName.split("@@", 2)` when it holds a group.
    if let Some((g, s)) = service
        .filter(|s| !is_blank(s))
        .and_then(|s| s.split_once(GROUP_SEPARATOR))
    {
        (group, service) = (Some(g), Some(s));
    }
    info.service_name = service;
    info.group = group;
    let mut more = Vec::new();
    match extractor {
        Extractor::Default => {
            info.ip = params.get("ip").map(Cow::Borrowed);
            info.port = or_alias(params, params.get("port"), "checkPort").map(Cow::Borrowed);
            info.cluster =
                or_alias(params, params.get("clusterName"), "cluster").map(Cow::Borrowed);
            info.metadata = metadata(params);
        }
        Extractor::InstanceList => info.clusters = params.get("clusters"),
        Extractor::Beat => {
            info.ip = params.get("ip").map(Cow::Borrowed);
            info.port = params.get("port").map(Cow::Borrowed);
            more.extend(beat_info(params));
        }
        Extractor::MetadataBatch => {
            info.metadata = metadata(params);
            more.extend(batch_instances(params));
        }
    }
    (info, more)
}

/// `value`, or `alias`'s value when `value` is blank.
fn or_alias<'a>(params: &'a Params<'_>, value: Option<&'a str>, alias: &str) -> Option<&'a str> {
    match value {
        Some(v) if !is_blank(v) => Some(v),
        _ => params.get(alias),
    }
}

/// `UtilsAndCommons.parseMetadata(metadata)`; `None` when it does not parse
/// (the controller then refuses it) or cannot be over the limit: its keys
/// and values are parts of the text (JSON escapes only shorten them), so a
/// text within the limit needs no parse.
fn metadata(params: &Params<'_>) -> Option<Metadata> {
    let text = params.get("metadata")?;
    if java_len(text) <= MAX_METADATA_LEN {
        return None;
    }
    Metadata::parse(text, &ParseLimits::default()).ok()
}

/// `ParamCheckRule.maxMetadataLength`.
const MAX_METADATA_LEN: usize = 1024;

/// The beat's `RsInfo` (read by Jackson, so as plain JSON here: the beat
/// reader's own checks come later, in the controller): ip,
/// `String.valueOf(port)` and cluster.
fn beat_info<'a>(params: &Params<'_>) -> Option<ParamInfo<'a>> {
    let text = params.beat()?.text();
    if is_blank(&text) {
        return None;
    }
    let beat = serde_json::from_str::<serde_json::Value>(&text).ok()?;
    beat.is_object().then(|| address(&beat, "cluster"))
}

/// Each of `instances`' ip, port and clusterName.
fn batch_instances<'a>(params: &Params<'_>) -> Vec<ParamInfo<'a>> {
    let Some(text) = params.get("instances").filter(|t| !is_blank(t)) else {
        return Vec::new();
    };
    let Ok(list) = serde_json::from_str::<Vec<serde_json::Value>>(text) else {
        return Vec::new();
    };
    list.iter().map(|i| address(i, "clusterName")).collect()
}

/// An object's `ip`, `port` (an `int` field: 0 when absent) and cluster.
fn address<'a>(object: &serde_json::Value, cluster_key: &str) -> ParamInfo<'a> {
    let text_of = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    };
    ParamInfo {
        ip: object.get("ip").and_then(text_of).map(Cow::Owned),
        port: Some(
            object
                .get("port")
                .and_then(text_of)
                .map_or(Cow::Borrowed("0"), Cow::Owned),
        ),
        cluster: object.get(cluster_key).and_then(text_of).map(Cow::Owned),
        ..ParamInfo::default()
    }
}

/// `DefaultParamChecker.checkParamInfoFormat`, in its order.
fn check_info(info: &ParamInfo<'_>) -> Result<(), String> {
    if let Some(id) = info.namespace_id.filter(|v| !is_blank(v)) {
        checked("namespaceId/tenant", id, 64, |s| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })?;
    }
    if let Some(name) = info.service_name.filter(|v| !is_blank(v)) {
        checked("serviceName", name, 512, service_name_ok)?;
    }
    if let Some(group) = info.group.filter(|v| !is_blank(v)) {
        checked("group", group, 128, |s| s.chars().all(group_char))?;
    }
    if let Some(list) = info.clusters.filter(|v| !is_blank(v)) {
        for cluster in list.split(',') {
            single_cluster(cluster)?;
        }
    }
    if let Some(cluster) = &info.cluster {
        single_cluster(cluster)?;
    }
    if let Some(ip) = info.ip.as_deref().filter(|v| !is_blank(v)) {
        checked("ip", ip, 128, |s| {
            s.chars().all(|c| !is_cjk(c) && !is_regex_space(c))
        })?;
    }
    if let Some(port) = info.port.as_deref().filter(|v| !is_blank(v)) {
        if !parse_java_int(port).is_ok_and(|p| (0..=65_535).contains(&p)) {
            return Err("Param 'port' is illegal, the value should be between 0 and 65535.".into());
        }
    }
    if let Some(m) = &info.metadata {
        // Keys and values that are not blank, in UTF-16 units.
        let total: usize = m
            .iter()
            .flat_map(|(k, v)| [k, v])
            .filter(|s| !is_blank(s))
            .map(java_len)
            .sum();
        if total > MAX_METADATA_LEN {
            return Err(
                "Param 'Metadata' is illegal, the param length should not exceed 1024.".into(),
            );
        }
    }
    Ok(())
}

/// `checkSingleClusterFormat`.
fn single_cluster(cluster: &str) -> Result<(), String> {
    if is_blank(cluster) {
        return Ok(());
    }
    checked("cluster", cluster, 64, |s| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// The length rule, then the pattern rule, with Nacos's two messages.
fn checked(
    param: &str,
    value: &str,
    max: usize,
    pattern: impl Fn(&str) -> bool,
) -> Result<(), String> {
    if java_len(value) > max {
        return Err(format!(
            "Param '{param}' is illegal, the param length should not exceed {max}."
        ));
    }
    if !pattern(value) {
        return Err(format!(
            "Param '{param}' is illegal, illegal characters should not appear in the param."
        ));
    }
    Ok(())
}

/// `^(?!@).((?!@@)[^\u4E00-\u9FA5\s])*$`: a first character that is not
/// `@` or a line terminator, then no `@@` and no CJK ideograph or ASCII
/// whitespace.
fn service_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if first == '@' || is_line_terminator(first) {
        return false;
    }
    let rest = chars.as_str();
    !rest.contains(GROUP_SEPARATOR) && rest.chars().all(|c| !is_cjk(c) && !is_regex_space(c))
}

/// `[a-zA-Z0-9-_:\.]`.
fn group_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')
}

/// `\u4E00-\u9FA5`.
fn is_cjk(c: char) -> bool {
    ('\u{4E00}'..='\u{9FA5}').contains(&c)
}

/// Java regex `\s`: `[ \t\n\x0B\f\r]`.
fn is_regex_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

/// What Java regex `.` does not match without DOTALL.
fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `StringUtils.isBlank`: empty or only `Character.isWhitespace` characters
/// (Unicode spaces but the no-break ones, and the ASCII separators).
fn is_blank(s: &str) -> bool {
    s.chars().all(|c| {
        (c.is_whitespace() && !matches!(c, '\u{85}' | '\u{A0}' | '\u{2007}' | '\u{202F}'))
            || ('\u{1C}'..='\u{1F}').contains(&c)
    })
}

/// `String.length()`: UTF-16 code units.
fn java_len(s: &str) -> usize {
    s.encode_utf16().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(extractor: Extractor, query: &str) -> Option<String> {
        let params = Params::parse(query, None).unwrap();
        check(extractor, &params).err()
    }

    /// The texts of `common/paramcheck/DefaultParamChecker.java` with the
    /// limits of `ParamCheckRule.java`.
    #[test]
    fn each_rule_refuses_with_nacos_text() {
        let illegal = |p: &str| {
            format!("Param '{p}' is illegal, illegal characters should not appear in the param.")
        };
        let d = Extractor::Default;
        assert_eq!(refused(d, "serviceName=a&ip=1.1.1.1&port=80"), None);
        assert_eq!(
            refused(d, "port=65536"),
            Some("Param 'port' is illegal, the value should be between 0 and 65535.".into())
        );
        assert!(refused(d, "port=x").is_some());
        assert_eq!(refused(d, "port=-0"), None, "Integer.parseInt reads -0");
        assert_eq!(
            refused(d, "serviceName=a%20b"),
            Some(illegal("serviceName"))
        );
        assert_eq!(refused(d, "serviceName=%40a"), Some(illegal("serviceName")));
        assert_eq!(
            refused(d, "serviceName=%20ab"),
            None,
            "the first character may be a space"
        );
        assert_eq!(
            refused(d, "serviceName=ab%20"),
            Some(illegal("serviceName"))
        );
        assert_eq!(
            refused(d, "serviceName=%E4%B8%AD%E6%96%87x"),
            Some(illegal("serviceName"))
        );
        assert_eq!(
            refused(d, &format!("serviceName={}", "s".repeat(513))),
            Some("Param 'serviceName' is illegal, the param length should not exceed 512.".into())
        );
        assert_eq!(refused(d, "groupName=a%2Fb"), Some(illegal("group")));
        assert_eq!(
            refused(d, "serviceName=a%2Fb%40%40s"),
            Some(illegal("group")),
            "split off the name"
        );
        assert_eq!(refused(d, "clusterName=c.1"), Some(illegal("cluster")));
        assert_eq!(
            refused(d, "cluster=c%201"),
            Some(illegal("cluster")),
            "the alias"
        );
        assert_eq!(
            refused(d, "namespaceId=a.b"),
            Some(illegal("namespaceId/tenant"))
        );
        assert_eq!(refused(d, "ip=1.1.1.1%20"), Some(illegal("ip")));
        assert_eq!(
            refused(d, "checkPort=70000"),
            refused(d, "port=70000"),
            "the alias"
        );
        let long = format!("metadata=%7B%22k%22%3A%22{}%22%7D", "v".repeat(1024));
        let at_limit = format!("metadata=%7B%22k%22%3A%22{}%22%7D", "v".repeat(1023));
        assert_eq!(refused(d, &at_limit), None, "1 + 1023 units is the limit");
        assert_eq!(
            refused(d, &long),
            Some("Param 'Metadata' is illegal, the param length should not exceed 1024.".into())
        );
        assert_eq!(
            refused(d, "serviceName=%20%20&groupName="),
            None,
            "blank is not checked"
        );
    }

    /// What each extractor reads (`naming/paramcheck/*HttpParamExtractor.java`).
    #[test]
    fn extractors_read_their_own_parameters() {
        // A list checks `clusters`, not `clusterName`.
        assert_eq!(
            refused(Extractor::InstanceList, "serviceName=a&clusterName=c.1"),
            None
        );
        assert!(refused(Extractor::InstanceList, "serviceName=a&clusters=c1,c.2").is_some());
        // The beat JSON's own port and cluster.
        let beat = "serviceName=a&beat=%7B%22ip%22%3A%221.1.1.1%22%2C%22port%22%3A80%2C%22cluster%22%3A%22c.1%22%7D";
        assert!(refused(Extractor::Beat, beat)
            .unwrap()
            .contains("'cluster'"));
        // Each instance of a metadata batch.
        let batch = "serviceName=a&instances=%5B%7B%22ip%22%3A%22a%20b%22%2C%22port%22%3A80%7D%5D";
        assert!(refused(Extractor::MetadataBatch, batch)
            .unwrap()
            .contains("'ip'"));
        assert_eq!(
            extractor(Route::V2InstanceList),
            Some(Extractor::InstanceList)
        );
        assert_eq!(extractor(Route::V2NamespaceCreate), None);
        assert_eq!(extractor(Route::InstanceRegister), None, "the 1.x door");
    }
}

//! `PUT /nacos/v1/ns/instance/beat`: the heartbeat request and its two JSON replies.
//!
//! The hottest request of the registry. A *light* beat (no `beat` parameter, what the
//! Java client sends while `lightBeatEnabled` is true) is parsed without any JSON work
//! and borrows all its strings. A *full* beat carries the client's `BeatInfo` JSON
//! (every Python beat is one); its `ip`, `port` and `cluster` override the query
//! parameters (Nacos `InstanceController.beat`), and the server may re-register an
//! unknown instance from it. The replies are written byte by byte.
//!
//! The `beat` JSON arrives URL-encoded (every `"`, `:`, `,` and brace an escape).
//! [`Params`] hands its first value to [`BeatParam::scan`], which reads the common
//! shape in place, escapes and all (see the `scan` module), so that a full beat
//! from a known instance neither decodes nor copies it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{
    check_weight, cluster_param, namespace_id, normalize_cluster, parse_port, validate_ip,
    Metadata, ParseLimits, ServiceName, DEFAULT_BEAT_INTERVAL_MS,
};
use crate::error::ProtoError;
use crate::json::{self, LenientBool, LenientF64, LenientI64};
use crate::params::{java_trim, percent_decode, Params};

mod scan;

use scan::Scan;

/// `code` of a beat reply for a known instance (`ResponseCode.OK`).
pub const CODE_OK: u32 = 10200;
/// `code` of a beat reply for an unknown instance (`RESOURCE_NOT_FOUND`); the client
/// re-registers.
pub const CODE_NOT_FOUND: u32 = 20404;

/// A parsed heartbeat with its effective instance identity.
#[derive(Debug, Clone, PartialEq)]
pub struct BeatRequest<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// The service (the Java and Python clients send it grouped).
    pub service: ServiceName<'a>,
    /// The address: the `beat` JSON's `ip` if it has one, else the `ip` parameter.
    pub ip: Cow<'a, str>,
    /// The port: the `beat` JSON's `port` if it has one, else the `port` parameter.
    pub port: u16,
    /// The cluster: the `beat` JSON's `cluster` if not blank, else `clusterName` /
    /// `cluster` / `DEFAULT`.
    pub cluster: Cow<'a, str>,
    /// The `beat` JSON, validated; `None` for a light beat.
    pub beat: Option<BeatBody<'a>>,
}

impl<'a> BeatRequest<'a> {
    /// Reads a beat. `ip` and `port` are required unless the `beat` JSON has them (Nacos
    /// would look up `:0` and answer 20404; an explicit 400 is easier to debug).
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let namespace_id = namespace_id(params, limits)?;
        let service = ServiceName::from_params(params, limits)?;
        let (beat, identity) = match params.beat() {
            None => (None, BeatIdentity::default()),
            Some(param) => match param.read(limits)? {
                Some((body, identity)) => (Some(body), identity),
                // Blank, as `optional` reads it: a light beat.
                None => (None, BeatIdentity::default()),
            },
        };
        let cluster = match identity.cluster {
            Some(c) => c,
            None => Cow::Borrowed(cluster_param(params, limits)?),
        };
        let ip = match identity.ip {
            Some(ip) => ip,
            None => {
                let ip = params.required("ip")?;
                validate_ip(ip)?;
                Cow::Borrowed(ip)
            }
        };
        let port = match identity.port {
            Some(p) => p,
            None => parse_port("port", params.required("port")?)?,
        };
        Ok(BeatRequest {
            namespace_id,
            service,
            ip,
            port,
            cluster,
            beat,
        })
    }

    /// Whether this is a light beat (no `beat` JSON).
    pub fn is_light(&self) -> bool {
        self.beat.is_none()
    }
}

/// The `beat` parameter as [`Params`] holds it: still encoded when the reader of
/// the common shape took it in place, decoded otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeatParam<'a>(Held<'a>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Held<'a> {
    /// The form value as sent, and what the reader found in it.
    Form { raw: &'a [u8], scan: Scan<'a> },
    /// The decoded value, not yet trimmed or read.
    Decoded(Cow<'a, str>),
}

impl<'a> BeatParam<'a> {
    /// Reads a form value (`%XX` escapes, `+` for a space) in place. `None`
    /// when it is not a valid beat in the common shape, or not decodable: the
    /// caller decodes it, with its own errors, and uses [`BeatParam::decoded`].
    pub fn scan(raw: &'a [u8]) -> Option<Self> {
        scan::scan_form(raw).map(|scan| BeatParam(Held::Form { raw, scan }))
    }

    /// A decoded value, to be read by serde (and the reader of the common shape).
    pub fn decoded(text: Cow<'a, str>) -> Self {
        BeatParam(Held::Decoded(text))
    }

    /// The decoded value, untrimmed (what `Params::get` would have given).
    pub fn text(&self) -> Cow<'_, str> {
        match &self.0 {
            Held::Form { raw, .. } => form_text(raw),
            Held::Decoded(text) => Cow::Borrowed(text),
        }
    }

    /// Validates the JSON as [`BeatInfo::parse`] does, with the same errors, and
    /// returns it with its identity; `None` when the value is blank (Nacos
    /// `WebUtils.optional`: no beat).
    fn read<'s>(
        &'s self,
        limits: &ParseLimits,
    ) -> Result<Option<(BeatBody<'s>, BeatIdentity<'s>)>, ProtoError> {
        let text = match &self.0 {
            Held::Form { raw, scan } => {
                // The raw length bounds the decoded one.
                if scan.fits(raw.len(), limits) {
                    return Ok(Some((BeatBody(Body::Form(raw)), scan.identity.reborrow())));
                }
                // Over a limit as sent: decoded, it may still fit, and serde decides.
                let decoded = percent_decode(raw)?;
                Cow::Owned(java_trim(&decoded).to_owned())
            }
            Held::Decoded(text) => Cow::Borrowed(java_trim(text)),
        };
        if text.is_empty() {
            return Ok(None);
        }
        let identity = match &text {
            Cow::Borrowed(t) => BeatIdentity::read(t, limits)?,
            Cow::Owned(t) => BeatIdentity::read(t, limits)?.into_owned(),
        };
        Ok(Some((BeatBody(Body::Text(text)), identity)))
    }
}

/// The decoding of a form value that the reader took (so it decodes).
fn form_text(raw: &[u8]) -> Cow<'_, str> {
    percent_decode(raw).unwrap_or(Cow::Borrowed(""))
}

/// The `beat` JSON of a request, already validated. Only a beat from an unknown
/// instance needs its other fields (to register it), so they are decoded then, by
/// [`BeatBody::info`], and a beat from a known instance allocates nothing for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeatBody<'a>(Body<'a>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Body<'a> {
    /// Still form-encoded, as sent.
    Form(&'a [u8]),
    /// Decoded and trimmed.
    Text(Cow<'a, str>),
}

impl<'a> BeatBody<'a> {
    /// The JSON text as the client sent it (decoded from the form, trimmed).
    pub fn text(&self) -> Cow<'a, str> {
        match &self.0 {
            Body::Form(raw) => match form_text(raw) {
                Cow::Borrowed(t) => Cow::Borrowed(java_trim(t)),
                Cow::Owned(t) => Cow::Owned(java_trim(&t).to_owned()),
            },
            Body::Text(t) => t.clone(),
        }
    }

    /// Every field, decoded. Cannot fail for a body that [`BeatRequest::parse`]
    /// accepted with the same limits; the `Result` is for any other limits.
    pub fn info(&self, limits: &ParseLimits) -> Result<BeatInfo, ProtoError> {
        BeatInfo::parse(&self.text(), limits)
    }
}

/// What a `beat` JSON says about the instance's identity: the fields that override
/// the request's parameters. Strings are borrowed from the text when it is in the
/// common shape (see the `scan` module), owned when serde had to decode it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BeatIdentity<'t> {
    /// `ip`, validated; `None` when absent or blank.
    pub ip: Option<Cow<'t, str>>,
    /// `port`; `None` when absent.
    pub port: Option<u16>,
    /// `cluster`, normalised and validated; `None` when absent or blank.
    pub cluster: Option<Cow<'t, str>>,
}

impl<'t> BeatIdentity<'t> {
    /// Validates the whole `beat` JSON as [`BeatInfo::parse`] does, with the same
    /// errors, and returns its identity fields.
    pub fn read(text: &'t str, limits: &ParseLimits) -> Result<Self, ProtoError> {
        if let Some(identity) = Self::scan(text, limits) {
            return Ok(identity);
        }
        let info = BeatInfo::parse(text, limits)?;
        Ok(BeatIdentity {
            ip: info.ip.map(Cow::Owned),
            port: info.port,
            cluster: info.cluster.map(Cow::Owned),
        })
    }

    /// The allocation-free reader alone: `Some` only for a valid text in the common
    /// shape. Public so that the fuzz target can hold it to its promise: whatever it
    /// accepts, [`BeatInfo::parse`] accepts with the same identity.
    pub fn scan(text: &'t str, limits: &ParseLimits) -> Option<Self> {
        scan::scan_text(text)
            .filter(|scan| scan.fits(text.len(), limits))
            .map(|scan| scan.identity)
    }

    /// The reader of the common shape on a form value as sent, escapes and all:
    /// `Some` only for a value that decodes to a valid text in the common shape
    /// within `limits`. Public so that the fuzz target can hold it to its promise:
    /// whatever it accepts, decoding and [`BeatInfo::parse`] accept with the same
    /// identity.
    pub fn scan_form(raw: &'t [u8], limits: &ParseLimits) -> Option<Self> {
        scan::scan_form(raw)
            .filter(|scan| scan.fits(raw.len(), limits))
            .map(|scan| scan.identity)
    }

    /// The same identity, borrowing what this one owns.
    fn reborrow(&self) -> BeatIdentity<'_> {
        BeatIdentity {
            ip: self.ip.as_deref().map(Cow::Borrowed),
            port: self.port,
            cluster: self.cluster.as_deref().map(Cow::Borrowed),
        }
    }

    /// The same identity, owning its strings.
    fn into_owned<'o>(self) -> BeatIdentity<'o> {
        BeatIdentity {
            ip: self.ip.map(|ip| Cow::Owned(ip.into_owned())),
            port: self.port,
            cluster: self.cluster.map(|c| Cow::Owned(c.into_owned())),
        }
    }
}

/// The `beat` JSON (the Java client's `BeatInfo`, read as the server's `RsInfo`).
/// Unknown fields are ignored; scalars are read leniently (`"8080"` or `8080`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BeatInfo {
    /// `ip`, validated; `None` when absent or blank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// `port`, within `0..=65535`; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `cluster`, normalised like the parameter (`None` → `DEFAULT`) and validated;
    /// `None` when absent or blank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// `serviceName` as the client sent it (the server uses the parameter instead).
    pub service_name: String,
    /// `weight`, default 1 (Nacos would take 0 from a missing field), within
    /// `[0, 10000]`.
    pub weight: f64,
    /// `ephemeral`, default true.
    pub ephemeral: bool,
    /// `metadata`, bounded like the `metadata` parameter.
    pub metadata: Metadata,
    /// `scheduled` (Java and Node send it; unused).
    pub scheduled: bool,
    /// `period` in ms (Java sends it; unused), 0 when absent.
    pub period: i64,
    /// `stopped` (Java sends it; unused).
    pub stopped: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBeat {
    #[serde(default)]
    ip: Option<String>,
    #[serde(default)]
    port: Option<LenientI64>,
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default)]
    service_name: Option<String>,
    #[serde(default)]
    weight: Option<LenientF64>,
    #[serde(default)]
    ephemeral: Option<LenientBool>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    scheduled: Option<LenientBool>,
    #[serde(default)]
    period: Option<LenientI64>,
    #[serde(default)]
    stopped: Option<LenientBool>,
}

impl BeatInfo {
    /// Parses and validates `beat` JSON.
    pub fn parse(text: &str, limits: &ParseLimits) -> Result<Self, ProtoError> {
        if text.len() > limits.max_beat_bytes {
            return Err(ProtoError::TooLong {
                param: "beat",
                len: text.len(),
                max: limits.max_beat_bytes,
            });
        }
        // serde would also read a struct from a JSON array; Jackson (and we) want an object.
        if !text.trim_start().starts_with('{') {
            return Err(ProtoError::BeatFormat("expected a JSON object".into()));
        }
        let raw: RawBeat =
            serde_json::from_str(text).map_err(|e| ProtoError::BeatFormat(e.to_string().into()))?;
        let ip = raw.ip.filter(|ip| !java_trim(ip).is_empty());
        if let Some(ip) = &ip {
            validate_ip(ip)?;
        }
        let port = raw
            .port
            .map(|LenientI64(p)| {
                u16::try_from(p).map_err(|_| ProtoError::OutOfRange {
                    param: "port",
                    value: p,
                    min: 0,
                    max: 65_535,
                })
            })
            .transpose()?;
        let cluster = match raw.cluster.as_deref().map(java_trim) {
            None | Some("") => None,
            Some(c) => Some(normalize_cluster(Some(c), limits)?.to_owned()),
        };
        let metadata = raw.metadata.unwrap_or_default();
        if metadata.len() > limits.max_metadata_entries {
            return Err(ProtoError::MetadataEntries {
                len: metadata.len(),
                max: limits.max_metadata_entries,
            });
        }
        Ok(BeatInfo {
            ip,
            port,
            cluster,
            service_name: raw.service_name.unwrap_or_default(),
            weight: check_weight(raw.weight.map_or(1.0, |w| w.0))?,
            ephemeral: raw.ephemeral.is_none_or(|e| e.0),
            metadata,
            scheduled: raw.scheduled.is_some_and(|s| s.0),
            period: raw.period.map_or(0, |p| p.0),
            stopped: raw.stopped.is_some_and(|s| s.0),
        })
    }

    /// The JSON text, as a client sends it in the `beat` parameter.
    pub fn to_json(&self) -> String {
        // Plain strings and numbers: serializing into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Appends the reply to a beat from a known instance:
/// `{"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true}`.
pub fn beat_ok(out: &mut Vec<u8>, client_beat_interval_ms: u64, light_beat_enabled: bool) {
    out.extend_from_slice(b"{\"clientBeatInterval\":");
    json::write_u64(out, client_beat_interval_ms);
    out.extend_from_slice(if light_beat_enabled {
        b",\"code\":10200,\"lightBeatEnabled\":true}"
    } else {
        b",\"code\":10200,\"lightBeatEnabled\":false}"
    });
}

/// Appends the reply to a beat from an unknown instance:
/// `{"clientBeatInterval":5000,"code":20404}` (Nacos sends no `lightBeatEnabled` here).
pub fn beat_not_found(out: &mut Vec<u8>, client_beat_interval_ms: u64) {
    out.extend_from_slice(b"{\"clientBeatInterval\":");
    json::write_u64(out, client_beat_interval_ms);
    out.extend_from_slice(b",\"code\":20404}");
}

/// A beat reply, as a client reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BeatResponse {
    /// The interval to beat at, in ms (5000 when absent).
    #[serde(default = "default_interval")]
    pub client_beat_interval: u64,
    /// [`CODE_OK`] or [`CODE_NOT_FOUND`].
    #[serde(default)]
    pub code: u32,
    /// Whether the next beats may be light (false when absent).
    #[serde(default)]
    pub light_beat_enabled: bool,
}

fn default_interval() -> u64 {
    DEFAULT_BEAT_INTERVAL_MS
}

impl BeatResponse {
    /// Parses a reply body.
    pub fn parse(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }

    /// Whether the server did not know the instance (re-register).
    pub fn is_not_found(&self) -> bool {
        self.code == CODE_NOT_FOUND
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with<R>(q: &str, f: impl FnOnce(Result<BeatRequest<'_>, ProtoError>) -> R) -> R {
        let p = Params::parse(q, None).unwrap();
        f(BeatRequest::parse(&p, &ParseLimits::default()))
    }

    #[test]
    fn light_beat_borrows() {
        with(
            "serviceName=G%40%40s&ip=1.2.3.4&port=80&clusterName=c1",
            |r| {
                let r = r.unwrap();
                assert!(r.is_light());
                assert!(matches!(r.ip, Cow::Borrowed("1.2.3.4")));
                assert!(matches!(r.cluster, Cow::Borrowed("c1")));
                assert_eq!((r.port, r.service.group, r.service.name), (80, "G", "s"));
            },
        );
        with("serviceName=s&port=80", |r| {
            assert_eq!(r.unwrap_err(), ProtoError::Required("ip"));
        });
    }

    #[test]
    fn beat_json_overrides_params() {
        let beat = r#"{"serviceName":"G@@s","ip":"10.0.0.1","port":"9090","cluster":"c2","weight":2,"metadata":{"k":1},"scheduled":true,"period":5000,"unknown":[1]}"#;
        let mut q = String::new();
        crate::params::QueryWriter::new(&mut q, "")
            .param("serviceName", "G@@s")
            .param("ip", "1.1.1.1")
            .param("port", "1")
            .param("beat", beat);
        with(&q[1..], |r| {
            let r = r.unwrap();
            assert_eq!((&*r.ip, r.port, &*r.cluster), ("10.0.0.1", 9090, "c2"));
            let b = r.beat.unwrap().info(&ParseLimits::default()).unwrap();
            assert_eq!(b.weight, 2.0);
            assert!(b.ephemeral && b.scheduled && !b.stopped);
            assert_eq!(b.period, 5000);
            assert_eq!(b.metadata.get("k"), Some("1"));
        });
    }

    #[test]
    fn malformed_beats() {
        let l = ParseLimits::default();
        for (text, want) in [
            (
                "{",
                "Param 'beat' is illegal: EOF while parsing an object at line 1 column 1",
            ),
            ("[]", "Param 'beat' is illegal: expected a JSON object"),
            ("null", "Param 'beat' is illegal: expected a JSON object"),
        ] {
            assert_eq!(BeatInfo::parse(text, &l).unwrap_err().to_string(), want);
        }
        assert!(matches!(
            BeatInfo::parse(r#"{"port":"x"}"#, &l),
            Err(ProtoError::BeatFormat(_))
        ));
        assert_eq!(
            BeatInfo::parse(r#"{"port":70000}"#, &l)
                .unwrap_err()
                .to_string(),
            "Param 'port' is illegal, it should be between 0 and 65535, current: 70000"
        );
        assert_eq!(
            BeatInfo::parse(r#"{"ip":"999.1.1.1"}"#, &l),
            Err(ProtoError::InvalidIp)
        );
        assert_eq!(
            BeatInfo::parse(r#"{"weight":-1}"#, &l),
            Err(ProtoError::WeightRange)
        );
        assert!(matches!(
            BeatInfo::parse(r#"{"cluster":"a b"}"#, &l),
            Err(ProtoError::ClusterNameSyntax(_))
        ));
        assert!(matches!(
            BeatInfo::parse(r#"{"metadata":{"a":{"b":1}}}"#, &l),
            Err(ProtoError::BeatFormat(_))
        ));
    }

    #[test]
    fn replies() {
        let mut out = Vec::new();
        beat_ok(&mut out, 5000, true);
        assert_eq!(
            out,
            br#"{"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true}"#
        );
        out.clear();
        beat_ok(&mut out, 1, false);
        assert_eq!(
            out,
            br#"{"clientBeatInterval":1,"code":10200,"lightBeatEnabled":false}"#
        );
        out.clear();
        beat_not_found(&mut out, 5000);
        assert_eq!(out, br#"{"clientBeatInterval":5000,"code":20404}"#);
        let r = BeatResponse::parse(&out).unwrap();
        assert!(r.is_not_found() && !r.light_beat_enabled);
    }
}

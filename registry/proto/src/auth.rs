//! `POST /nacos/v1/auth/login`: the login parameters and the token reply.
//!
//! Clients configured with a username log in first and then send `accessToken` on every
//! call (the Python client reads `accessToken` and `tokenTtl` from the reply).

use serde::{Deserialize, Serialize};

use crate::error::ProtoError;
use crate::params::Params;

/// A login request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginRequest<'a> {
    /// `username`.
    pub username: &'a str,
    /// `password`.
    pub password: &'a str,
}

impl<'a> LoginRequest<'a> {
    /// Reads `username` and `password` (both required).
    pub fn parse(params: &'a Params<'_>) -> Result<Self, ProtoError> {
        Ok(LoginRequest {
            username: params.required("username")?,
            password: params.required("password")?,
        })
    }
}

/// The login reply: `{"accessToken":"...","tokenTtl":18000,"globalAdmin":true}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginResponse {
    /// The token to send as `accessToken`.
    pub access_token: String,
    /// Token lifetime in seconds.
    pub token_ttl: u64,
    /// Whether the user is an administrator.
    #[serde(default)]
    pub global_admin: bool,
}

impl LoginResponse {
    /// Appends the JSON body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Strings and numbers: serializing cannot fail.
        let _ = serde_json::to_writer(out, self);
    }

    /// Appends the v3 body (`UserControllerV3.login`): `accessToken`,
    /// `tokenTtl`, `globalAdmin` and `username`.
    pub fn encode_v3(&self, username: &str, out: &mut Vec<u8>) {
        let body = serde_json::json!({
            "accessToken": self.access_token,
            "tokenTtl": self.token_ttl,
            "globalAdmin": self.global_admin,
            "username": username,
        });
        let _ = serde_json::to_writer(out, &body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login() {
        let p = Params::parse("username=nacos&password=p%26w", None).unwrap();
        let r = LoginRequest::parse(&p).unwrap();
        assert_eq!((r.username, r.password), ("nacos", "p&w"));
        let p = Params::parse("username=nacos", None).unwrap();
        assert_eq!(
            LoginRequest::parse(&p),
            Err(ProtoError::Required("password"))
        );
        let mut out = Vec::new();
        LoginResponse {
            access_token: "t".into(),
            token_ttl: 18000,
            global_admin: true,
        }
        .encode(&mut out);
        assert_eq!(
            out,
            br#"{"accessToken":"t","tokenTtl":18000,"globalAdmin":true}"#
        );
    }
}

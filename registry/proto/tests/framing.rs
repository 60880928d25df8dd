//! HTTP/1.1 framing: pipelined requests, partial input at every split point, chunked
//! responses as Tomcat sends them, and both directions of our own writers.

use std::borrow::Cow;

use registry_proto::http1::{
    finish_response_at_eof, parse_request, parse_response, write_request, write_response,
    Connection, ContentType, HttpError, Limits, Method, Version,
};

/// A light beat, a form POST, a chunked PUT, a GET from an HTTP/1.0 client.
const PIECES: [&[u8]; 4] = [
    b"PUT /nacos/v1/ns/instance/beat?serviceName=G%40%40s&ip=1.1.1.1&port=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
    b"POST /nacos/v1/ns/instance HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 34\r\n\r\nserviceName=s&ip=1.1.1.1&port=8080",
    b"PUT /nacos/v1/ns/instance/beat HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n6\r\nbeat=%\r\n4\r\n7B%7\r\n1\r\nD\r\n0\r\n\r\n",
    b"GET /nacos/v1/ns/operator/metrics HTTP/1.0\r\n\r\n",
];

fn pipelined() -> Vec<u8> {
    PIECES.concat()
}

#[test]
fn pipelined_requests_parse_one_after_another() {
    let wire = pipelined();
    let limits = Limits::default();
    let mut rest = &wire[..];
    let mut seen = Vec::new();
    while !rest.is_empty() {
        let (req, used) = parse_request(rest, &limits).unwrap().expect("complete");
        seen.push((
            req.method,
            req.path.to_owned(),
            req.body.to_vec(),
            req.keep_alive,
            used,
        ));
        rest = &rest[used..];
    }
    assert_eq!(seen.len(), 4);
    let lengths: Vec<usize> = seen.iter().map(|s| s.4).collect();
    assert_eq!(lengths, PIECES.map(<[u8]>::len));
    assert_eq!(seen[1].2, b"serviceName=s&ip=1.1.1.1&port=8080");
    assert_eq!(
        (seen[2].0, seen[2].2.as_slice()),
        (Method::Put, &b"beat=%7B%7D"[..])
    );
    assert_eq!(seen[3].1, "/nacos/v1/ns/operator/metrics");
    assert!(
        seen[..3].iter().all(|s| s.3) && !seen[3].3,
        "1.0 closes by default"
    );
}

#[test]
fn partial_input_is_incomplete_at_every_split_point() {
    let wire = pipelined();
    let limits = Limits::default();
    let mut start = 0;
    while start < wire.len() {
        let (_, used) = parse_request(&wire[start..], &limits).unwrap().unwrap();
        for cut in start..start + used {
            assert_eq!(
                parse_request(&wire[start..cut], &limits),
                Ok(None),
                "request at {start} cut at {cut}"
            );
        }
        // One extra byte of the next request never changes the answer.
        let (_, used2) = parse_request(&wire[start..(start + used + 1).min(wire.len())], &limits)
            .unwrap()
            .unwrap();
        assert_eq!(used, used2);
        start += used;
    }
}

#[test]
fn content_length_body_is_borrowed() {
    let wire = b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
    let (req, _) = parse_request(wire, &Limits::default()).unwrap().unwrap();
    assert!(matches!(req.body, Cow::Borrowed(b"abc")));
}

/// A list body as Tomcat sends it: chunked in pieces, plus a second response pipelined.
fn tomcat_chunked() -> (Vec<u8>, String) {
    let body = format!(
        r#"{{"name":"DEFAULT_GROUP@@demo","clusters":"","hosts":[{}]}}"#,
        (0..50)
            .map(|i| format!(r#"{{"ip":"10.0.0.{i}","port":8080,"healthy":true}}"#))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut wire = b"HTTP/1.1 200 \r\nContent-Type: application/json;charset=UTF-8\r\nTransfer-Encoding: chunked\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n".to_vec();
    for piece in body.as_bytes().chunks(300) {
        wire.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        wire.extend_from_slice(piece);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    (wire, body)
}

#[test]
fn chunked_responses_decode() {
    let (mut wire, body) = tomcat_chunked();
    let first_len = wire.len();
    wire.extend_from_slice(b"HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nok");
    let (res, used) = parse_response(&wire).unwrap().unwrap();
    assert_eq!(used, first_len);
    assert_eq!(res.status, 200);
    assert!(res.keep_alive);
    assert_eq!(res.content_type, Some("application/json;charset=UTF-8"));
    assert_eq!(res.body_text(), Some(body.as_str()));
    assert!(
        matches!(res.body, Cow::Owned(_)),
        "several chunks were joined"
    );
    let (res2, used2) = parse_response(&wire[used..]).unwrap().unwrap();
    assert_eq!((res2.body_text(), used + used2), (Some("ok"), wire.len()));
    let info = registry_proto::naming::list::ServiceInfo::parse(&res.body).unwrap();
    assert_eq!(info.hosts.len(), 50);
}

#[test]
fn chunked_response_is_incomplete_at_every_split_point() {
    let (wire, _) = tomcat_chunked();
    for cut in 0..wire.len() {
        assert_eq!(parse_response(&wire[..cut]), Ok(None), "cut at {cut}");
    }
}

#[test]
fn our_responses_parse_back() {
    let mut wire = Vec::new();
    write_response(&mut wire, 200, ContentType::Text, b"ok", true);
    write_response(
        &mut wire,
        400,
        ContentType::Text,
        b"Param 'ip' is required.",
        Connection::Close,
    );
    let (a, n) = parse_response(&wire).unwrap().unwrap();
    assert_eq!(
        (a.status, a.body_text(), a.keep_alive),
        (200, Some("ok"), true)
    );
    let (b, m) = parse_response(&wire[n..]).unwrap().unwrap();
    assert_eq!((b.status, b.keep_alive), (400, false));
    assert_eq!(b.body_text(), Some("Param 'ip' is required."));
    assert_eq!(n + m, wire.len());
}

#[test]
fn our_requests_parse_back() {
    let mut wire = Vec::new();
    write_request(
        &mut wire,
        Method::Put,
        "/nacos/v1/ns/instance/beat?ip=1.1.1.1",
        "h:8848",
        None,
    );
    write_request(
        &mut wire,
        Method::Post,
        "/nacos/v1/ns/instance",
        "h:8848",
        Some(("application/x-www-form-urlencoded", b"serviceName=s")),
    );
    let limits = Limits::default();
    let (a, n) = parse_request(&wire, &limits).unwrap().unwrap();
    assert_eq!(
        (a.method, a.path, a.query),
        (Method::Put, "/nacos/v1/ns/instance/beat", "ip=1.1.1.1")
    );
    assert_eq!(a.host(), Some("h:8848"));
    assert_eq!(a.version, Version::Http11);
    let (b, m) = parse_request(&wire[n..], &limits).unwrap().unwrap();
    assert!(b.is_form());
    assert_eq!(&*b.body, b"serviceName=s");
    assert_eq!(n + m, wire.len());
}

#[test]
fn response_errors_and_eof() {
    assert_eq!(
        parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
        Err(HttpError::Malformed("invalid chunk size"))
    );
    let (r, _) = finish_response_at_eof(b"HTTP/1.1 500 Server Error\r\n\r\nboom").unwrap();
    assert_eq!(
        (r.status, r.body_text(), r.keep_alive),
        (500, Some("boom"), false)
    );
    assert!(finish_response_at_eof(b"HTTP/1.1 200 OK\r\nContent-Le").is_err());
}

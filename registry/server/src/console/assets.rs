//! The console's static files, compiled into the binary so the console
//! works offline and ships with the server that it shows: one HTML page,
//! one stylesheet and plain JavaScript modules (no build step, no CDN, no
//! external fonts). The sources live in `registry/server/console/`.

/// One static file.
#[derive(Debug, PartialEq, Eq)]
pub struct Asset {
    /// The file name under `/nacos/console/` (`index.html` is served at
    /// `/nacos/` too).
    pub name: &'static str,
    /// The `Content-Type` value.
    pub content_type: &'static str,
    /// The bytes.
    pub body: &'static [u8],
}

impl Asset {
    /// Whether this is the HTML page (which carries the content policy).
    pub fn is_page(&self) -> bool {
        self.content_type.starts_with("text/html")
    }
}

const HTML: &str = "text/html;charset=UTF-8";
const JS: &str = "text/javascript;charset=UTF-8";
const CSS: &str = "text/css;charset=UTF-8";

macro_rules! asset {
    ($name:literal, $ct:expr) => {
        Asset {
            name: $name,
            content_type: $ct,
            body: include_bytes!(concat!("../../console/", $name)),
        }
    };
}

/// Every file the console serves.
pub static ASSETS: [Asset; 12] = [
    asset!("index.html", HTML),
    asset!("style.css", CSS),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("login.js", JS),
    asset!("namespaces.js", JS),
    asset!("services.js", JS),
    asset!("service.js", JS),
    asset!("cluster.js", JS),
    asset!("live.js", JS),
    asset!("metrics.js", JS),
];

/// Where the files are served.
const PREFIX: &str = "/nacos/console/";

/// True for any path under the assets' prefix, known or not (unknown ones
/// are the console's 404, not the naming API's).
pub fn is_asset_path(path: &str) -> bool {
    path.starts_with(PREFIX)
}

/// The file a path names: `/nacos`, `/nacos/` and `/nacos/index.html` are
/// the page; `/nacos/console/NAME` the others.
pub fn find(path: &str) -> Option<&'static Asset> {
    let name = match path {
        "/nacos" | "/nacos/" | "/nacos/index.html" => "index.html",
        p => p.strip_prefix(PREFIX)?,
    };
    ASSETS.iter().find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_served() {
        // A module imported but not listed would load as a 404 in the
        // browser; catch it here rather than in the browser test.
        for a in ASSETS.iter().filter(|a| a.content_type == JS) {
            let text = std::str::from_utf8(a.body).unwrap();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let from = line.rsplit("from").next().unwrap();
                let name = from
                    .trim()
                    .trim_matches(|c| c == '\'' || c == '"' || c == ';');
                let name = name.trim_start_matches("./");
                assert!(
                    find(&format!("{PREFIX}{name}")).is_some(),
                    "{} imports {name}, which is not in ASSETS",
                    a.name
                );
            }
        }
    }

    #[test]
    fn no_asset_builds_html_from_strings() {
        // Everything a user or client supplied is rendered as text: the
        // modules never assign HTML or evaluate strings.
        for a in ASSETS.iter().filter(|a| a.content_type == JS) {
            let text = std::str::from_utf8(a.body).unwrap();
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
            ] {
                assert!(!text.contains(banned), "{} uses {banned}", a.name);
            }
        }
    }

    #[test]
    fn paths_resolve() {
        assert_eq!(find("/nacos").unwrap().name, "index.html");
        assert_eq!(find("/nacos/").unwrap().name, "index.html");
        assert_eq!(find("/nacos/console/app.js").unwrap().content_type, JS);
        assert!(find("/nacos/console/../Cargo.toml").is_none());
        assert!(find("/nacos/v1/ns/instance").is_none());
    }
}

//! Which proxy a request goes through when the kubeconfig names none: `HTTPS_PROXY`,
//! `HTTP_PROXY` and `NO_PROXY` read with the rules of Go's `http.ProxyFromEnvironment`
//! (`golang.org/x/net/http/httpproxy`), so that kinformer proxies what kubectl proxies, and
//! never a request to the loopback interface.

use std::fmt;
use std::net::IpAddr;

use reqwest::Url;

use crate::secret::redact_url;

/// The proxy settings of an environment, and the decision they make for each request URL, as
/// Go's `http.ProxyFromEnvironment` (which kubectl and client-go use) makes it:
///
/// - An `https` URL goes through `HTTPS_PROXY` (or `https_proxy`), an `http` URL through
///   `HTTP_PROXY` (or `http_proxy`); the upper-case name wins when both are set and not empty.
///   There is no fallback from one to the other, and `ALL_PROXY` is not read.
/// - When `REQUEST_METHOD` is set (the process is a CGI script, whose `HTTP_PROXY` a client
///   can set with a `Proxy:` header), `HTTP_PROXY` is ignored. (Go fails such requests instead.)
/// - A proxy value without a scheme (`proxy.corp:3128`) means `http://`. A value that does not
///   parse is ignored, with a warning, as Go ignores it.
/// - `localhost`, `127.0.0.0/8` and `::1` are never proxied.
/// - `NO_PROXY` (or `no_proxy`) lists, separated by commas, what goes direct: `*` (everything);
///   an IP address (`10.1.2.3`, `::1`), optionally with a port (`10.1.2.3:6443`,
///   `[fd00::1]:6443`); a CIDR range (`10.0.0.0/8`, `fd00::/8`); a host name, which matches
///   itself and every name under it (`corp.example` matches `corp.example` and
///   `api.corp.example`); a name with a leading `.` or `*.`, which matches only the names under
///   it (`.corp.example`); a name with a port (`corp.example:6443`), which matches only that
///   port. Entries are trimmed and compared without regard to case.
///
/// A [`Config`](crate::Config) whose `proxy_url` is set (a kubeconfig cluster's `proxy-url`)
/// does not consult the environment at all; otherwise [`Client::new`](crate::Client::new) uses
/// [`Config::proxy_env`](crate::Config::proxy_env), or reads the process's environment.
///
/// ```
/// use kinformer_client::ProxyEnv;
///
/// let env = ProxyEnv::from_lookup(|name| match name {
///     "HTTPS_PROXY" => Some("proxy.corp:3128".to_owned()),
///     "NO_PROXY" => Some(".internal,10.0.0.0/8".to_owned()),
///     _ => None,
/// });
/// assert_eq!(
///     env.proxy_for("https://api.example.com:6443").as_deref(),
///     Some("http://proxy.corp:3128/")
/// );
/// assert_eq!(env.proxy_for("https://127.0.0.1:6443"), None); // loopback: never
/// assert_eq!(env.proxy_for("https://k8s.internal"), None); // NO_PROXY
/// assert_eq!(env.proxy_for("https://10.3.0.1"), None); // NO_PROXY, by range
/// assert_eq!(env.proxy_for("http://api.example.com"), None); // no HTTP_PROXY
/// ```
#[derive(Clone, Default)]
pub struct ProxyEnv {
    /// The proxy for `http` URLs, and the variable it came from.
    http: Option<(Url, &'static str)>,
    /// The proxy for `https` URLs, and the variable it came from.
    https: Option<(Url, &'static str)>,
    /// What goes direct.
    no_proxy: Vec<Rule>,
}

/// One `NO_PROXY` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// `*`: nothing is proxied.
    All,
    /// An address range (`10.0.0.0/8`).
    Cidr { network: IpAddr, prefix: u8 },
    /// One address, on one port or (`port` empty) on any.
    Ip { ip: IpAddr, port: String },
    /// Names ending in `suffix` (which starts with `.`), and the name itself when `exact`; on
    /// one port or (`port` empty) on any.
    Domain {
        suffix: String,
        exact: bool,
        port: String,
    },
}

impl fmt::Debug for ProxyEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |p: &Option<(Url, &'static str)>| {
            p.as_ref()
                .map(|(url, var)| format!("{} (from {var})", redact_url(url.as_str())))
        };
        f.debug_struct("ProxyEnv")
            .field("http", &shown(&self.http))
            .field("https", &shown(&self.https))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl ProxyEnv {
    /// The settings of the process's environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings of an environment given as a lookup function (`None` for a variable that is
    /// not set), so that tests and embedders need not change the process's environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        // The first of the names that is set and not empty, as Go's `getEnvAny`.
        let any = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|n| lookup(n).filter(|v| !v.is_empty()).map(|v| (v, n)))
        };
        let cgi = lookup("REQUEST_METHOD").is_some_and(|v| !v.is_empty());
        let mut http = any(["HTTP_PROXY", "http_proxy"]).and_then(parse_proxy);
        if cgi && let Some((_, var)) = http.take() {
            tracing::warn!(
                "{var} is ignored: REQUEST_METHOD is set, so this may be a CGI script, whose \
                 HTTP_PROXY a client can set (https://golang.org/s/cgihttpproxy)"
            );
        }
        let https = any(["HTTPS_PROXY", "https_proxy"]).and_then(parse_proxy);
        let no_proxy = any(["NO_PROXY", "no_proxy"])
            .map(|(v, _)| parse_no_proxy(&v))
            .unwrap_or_default();
        Self {
            http,
            https,
            no_proxy,
        }
    }

    /// `true` when no proxy is set at all: every request goes direct.
    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// The proxy a request to `url` goes through, `None` when it goes direct (or `url` does
    /// not parse).
    pub fn proxy_for(&self, url: &str) -> Option<String> {
        let url = Url::parse(url).ok()?;
        self.select(&url).map(|(proxy, _)| proxy.to_string())
    }

    /// The proxy for `url`, and the variable it came from.
    pub(crate) fn select(&self, url: &Url) -> Option<(&Url, &'static str)> {
        let proxy = match url.scheme() {
            "https" => self.https.as_ref(),
            "http" => self.http.as_ref(),
            _ => None,
        }?;
        let port = url.port_or_known_default().map(|p| p.to_string());
        self.use_proxy(url.host_str()?, port.as_deref().unwrap_or_default())
            .then_some((&proxy.0, proxy.1))
    }

    /// Whether a request to `host` (a URL's host: a lower-case name in punycode, an IPv4
    /// address, or an IPv6 address in brackets) on `port` goes through a proxy: Go's
    /// `useProxy`.
    fn use_proxy(&self, host: &str, port: &str) -> bool {
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let name = host.trim().to_ascii_lowercase();
        let ip = name.parse::<IpAddr>().ok().map(|ip| ip.to_canonical());
        if name == "localhost" || ip.is_some_and(|ip| ip.is_loopback()) {
            return false;
        }
        !self
            .no_proxy
            .iter()
            .any(|rule| rule.matches(&name, port, ip))
    }
}

impl Rule {
    fn matches(&self, name: &str, port: &str, ip: Option<IpAddr>) -> bool {
        let port_ok = |p: &str| p.is_empty() || p == port;
        match self {
            Self::All => true,
            Self::Cidr { network, prefix } => ip.is_some_and(|ip| in_range(ip, *network, *prefix)),
            Self::Ip { ip: want, port: p } => ip == Some(*want) && port_ok(p),
            Self::Domain {
                suffix,
                exact,
                port: p,
            } => {
                (name.ends_with(suffix.as_str()) || (*exact && name == &suffix[1..])) && port_ok(p)
            }
        }
    }
}

/// A proxy value as Go's `parseProxy` reads it: a URL with scheme `http`, `https` or `socks5`,
/// or else, when it names no scheme, the value with `http://` in front. `None` (with a
/// warning) when neither parses.
fn parse_proxy((value, var): (String, &'static str)) -> Option<(Url, &'static str)> {
    let with_host = |u: Url| u.has_host().then_some(u);
    let parsed = Url::parse(&value)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https" | "socks5"))
        .and_then(with_host)
        .or_else(|| {
            (!value.contains("://"))
                .then(|| Url::parse(&format!("http://{value}")).ok())
                .flatten()
                .and_then(with_host)
        });
    if parsed.is_none() {
        tracing::warn!(
            "{var} is ignored: {:?} is not a proxy URL",
            redact_url(&value)
        );
    }
    parsed.map(|u| (u, var))
}

/// The entries of `NO_PROXY`, as Go's `httpproxy` reads them; malformed ones are skipped.
fn parse_no_proxy(value: &str) -> Vec<Rule> {
    let mut rules = Vec::new();
    for entry in value.split(',') {
        let entry = entry.trim().to_ascii_lowercase();
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            return vec![Rule::All];
        }
        if let Some((network, prefix)) = parse_cidr(&entry) {
            rules.push(Rule::Cidr { network, prefix });
            continue;
        }
        let (host, port) = split_host_port(&entry).unwrap_or((entry.as_str(), ""));
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            continue;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            rules.push(Rule::Ip {
                ip: ip.to_canonical(),
                port: port.to_owned(),
            });
            continue;
        }
        let host = host
            .strip_prefix('*')
            .filter(|h| h.starts_with('.'))
            .unwrap_or(host);
        let (exact, bare) = match host.strip_prefix('.') {
            Some(bare) => (false, bare),
            None => (true, host),
        };
        rules.push(Rule::Domain {
            suffix: format!(".{}", to_ascii_name(bare)),
            exact,
            port: port.to_owned(),
        });
    }
    rules
}

/// A name in the form requests carry it: an internationalized name as punycode (the URL's host
/// already is), anything else as it is.
fn to_ascii_name(name: &str) -> String {
    if name.is_ascii() {
        return name.to_owned();
    }
    Url::parse(&format!("http://{name}/"))
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| name.to_owned())
}

/// `host:port` or `[host]:port` split as Go's `net.SplitHostPort` splits it (the port is any
/// text, possibly empty); `None` for a value without a port or with too many colons.
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':')?;
        return (!port.contains(['[', ']'])).then_some((host, port));
    }
    let (host, port) = s.rsplit_once(':')?;
    (!host.contains([':', '[', ']']) && !port.contains(['[', ']'])).then_some((host, port))
}

/// An address range `address/bits`, as Go's `net.ParseCIDR` reads it.
fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, bits) = s.split_once('/')?;
    let addr = addr.parse::<IpAddr>().ok()?;
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) || bits.len() > 3 {
        return None;
    }
    let prefix = bits.parse::<u8>().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some((addr, prefix))
}

/// Whether `ip` lies in `network/prefix`. An IPv4 address written as IPv6 (`::ffff:10.0.0.1`)
/// is the IPv4 address, as in Go.
fn in_range(ip: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let bits = |a: IpAddr| match a.to_canonical() {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32u32),
        IpAddr::V6(v6) => (u128::from(v6), 128u32),
    };
    let ((ip, ip_len), (net, net_len)) = (bits(ip), bits(network));
    if ip_len != net_len {
        return false;
    }
    let shift = net_len - u32::from(prefix);
    shift >= 128 || (ip >> shift) == (net >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    /// The environment, a request URL, and the proxy it goes through.
    type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, Option<&'a str>);

    /// Go's `httpproxy` test table, and more: (environment, request URL, expected proxy).
    #[test]
    fn proxies_as_go_proxy_from_environment() {
        const P: &str = "http://proxy.corp:3128/";
        const S: &str = "http://secure.corp:3129/";
        let base: &[(&str, &str)] = &[("HTTP_PROXY", P), ("HTTPS_PROXY", S)];
        #[rustfmt::skip]
        let cases: Vec<Case<'_>> = vec![
            // The scheme picks the variable; no fallback from one to the other.
            (base.to_vec(), "http://api.example.com", Some(P)),
            (base.to_vec(), "https://api.example.com", Some(S)),
            (vec![("HTTP_PROXY", P)], "https://api.example.com", None),
            (vec![("HTTPS_PROXY", S)], "http://api.example.com", None),
            (base.to_vec(), "ftp://api.example.com", None),
            // Upper case first; an empty value counts as unset; lower case alone works.
            (vec![("HTTP_PROXY", P), ("http_proxy", "http://lower:1")], "http://a.example", Some(P)),
            (vec![("HTTP_PROXY", ""), ("http_proxy", "http://lower:1")], "http://a.example", Some("http://lower:1/")),
            (vec![("https_proxy", "http://lower:1")], "https://a.example", Some("http://lower:1/")),
            // A value without a scheme is http://; an https proxy stays https.
            (vec![("HTTPS_PROXY", "proxy.corp:3128")], "https://a.example", Some(P)),
            (vec![("HTTPS_PROXY", "10.0.0.9:3128")], "https://a.example", Some("http://10.0.0.9:3128/")),
            (vec![("HTTPS_PROXY", "https://proxy.corp")], "https://a.example", Some("https://proxy.corp/")),
            (vec![("HTTPS_PROXY", "http://u:p@proxy.corp:3128")], "https://a.example", Some("http://u:p@proxy.corp:3128/")),
            // A value that does not parse is ignored.
            (vec![("HTTPS_PROXY", "http://[bad")], "https://a.example", None),
            (vec![("HTTPS_PROXY", "::")], "https://a.example", None),
            // CGI: HTTP_PROXY (either case) is ignored, HTTPS_PROXY is not.
            (vec![("HTTP_PROXY", P), ("REQUEST_METHOD", "GET")], "http://a.example", None),
            (vec![("http_proxy", P), ("REQUEST_METHOD", "GET")], "http://a.example", None),
            (vec![("HTTPS_PROXY", S), ("REQUEST_METHOD", "GET")], "https://a.example", Some(S)),
            (vec![("HTTP_PROXY", P), ("REQUEST_METHOD", "")], "http://a.example", Some(P)),
            // Loopback never goes through a proxy, whatever NO_PROXY says.
            (base.to_vec(), "http://localhost:8080", None),
            (base.to_vec(), "https://LOCALHOST", None),
            (base.to_vec(), "http://127.0.0.1:6443", None),
            (base.to_vec(), "https://127.4.5.6", None),
            (base.to_vec(), "http://[::1]:6443", None),
            (base.to_vec(), "http://[::ffff:127.0.0.1]:6443", None),
            (base.to_vec(), "http://localhost.example", Some(P)),
            (base.to_vec(), "http://128.0.0.1", Some(P)),
            (base.to_vec(), "http://[::2]", Some(P)),
        ];
        for (vars, url, want) in cases {
            let got = ProxyEnv::from_lookup(env(&vars)).proxy_for(url);
            assert_eq!(got.as_deref(), want, "{vars:?} {url}");
        }
    }

    /// `NO_PROXY` forms: (NO_PROXY, request URL, proxied).
    #[test]
    fn no_proxy_forms() {
        #[rustfmt::skip]
        let cases: &[(&str, &str, bool)] = &[
            ("", "http://api.example.com", true),
            ("*", "http://api.example.com", false),
            ("*", "http://10.0.0.1", false),
            ("foo.com, *", "http://api.example.com", false),
            // A name matches itself and the names under it.
            ("example.com", "http://example.com", false),
            ("example.com", "http://api.example.com", false),
            ("example.com", "http://a.b.example.com:6443", false),
            ("example.com", "http://notexample.com", true),
            ("example.com", "http://example.com.evil", true),
            // A leading "." or "*." matches only the names under it.
            (".example.com", "http://example.com", true),
            (".example.com", "http://api.example.com", false),
            ("*.example.com", "http://example.com", true),
            ("*.example.com", "http://api.example.com", false),
            // Trimmed, case-insensitive, empty entries skipped.
            ("  , Example.COM ,", "http://API.example.com", false),
            // With a port, only that port; the default port of the scheme counts.
            ("example.com:6443", "https://api.example.com:6443", false),
            ("example.com:6443", "https://api.example.com", true),
            ("example.com:443", "https://api.example.com", false),
            ("example.com:80", "http://example.com", false),
            // Addresses, with and without a port.
            ("10.1.2.3", "http://10.1.2.3:6443", false),
            ("10.1.2.3", "http://10.1.2.4", true),
            ("10.1.2.3:6443", "https://10.1.2.3:6443", false),
            ("10.1.2.3:6443", "https://10.1.2.3", true),
            ("fd00::1", "https://[fd00::1]:6443", false),
            ("[fd00::1]:6443", "https://[fd00::1]:6443", false),
            ("[fd00::1]:6443", "https://[fd00::1]:443", true),
            ("[fd00::1]", "https://[fd00::1]", false),
            ("::ffff:10.1.2.3", "https://10.1.2.3", false),
            // Ranges.
            ("10.0.0.0/8", "https://10.200.3.4:6443", false),
            ("10.0.0.0/8", "https://11.0.0.1", true),
            ("192.168.1.0/24", "https://192.168.1.77", false),
            ("192.168.1.0/24", "https://192.168.2.1", true),
            ("0.0.0.0/0", "https://8.8.8.8", false),
            ("fd00::/8", "https://[fd12::3]", false),
            ("fd00::/8", "https://[fe80::1]", true),
            ("10.0.0.0/8", "https://[::ffff:10.0.0.1]", false),
            ("10.0.0.0/8", "https://[fd00::1]", true),
            ("10.0.0.0/33", "https://10.0.0.1", true), // not a range, nor a name that matches
            ("10.0.0.0/8", "https://k8s.internal", true), // a range matches addresses only
            // A range or an address never matches a name, but Go's name suffix does match an
            // address whose text ends with it.
            ("10.1.2.3", "https://api.example.com", true),
            ("2.3", "https://10.1.2.3", false),
            // Malformed entries are skipped.
            (":6443", "https://api.example.com:6443", true),
            ("[", "https://api.example.com", true),
            // Internationalized names compare as punycode.
            ("bücher.example", "https://www.bücher.example", false),
            ("xn--bcher-kva.example", "https://bücher.example", false),
        ];
        for (no_proxy, url, proxied) in cases {
            let vars = [
                ("HTTP_PROXY", "http://proxy:1"),
                ("HTTPS_PROXY", "http://proxy:1"),
                ("NO_PROXY", *no_proxy),
            ];
            let got = ProxyEnv::from_lookup(env(&vars)).proxy_for(url).is_some();
            assert_eq!(got, *proxied, "NO_PROXY={no_proxy:?} {url}");
        }
        // The lower-case name is read when the upper-case one is not set.
        let vars = [
            ("HTTPS_PROXY", "http://proxy:1"),
            ("no_proxy", "example.com"),
        ];
        assert_eq!(
            ProxyEnv::from_lookup(env(&vars)).proxy_for("https://api.example.com"),
            None
        );
    }

    #[test]
    fn debug_hides_proxy_credentials() {
        let vars = [("HTTPS_PROXY", "http://bob:s3cret-9f2c@proxy:3128")];
        let shown = format!("{:?}", ProxyEnv::from_lookup(env(&vars)));
        assert!(!shown.contains("9f2c"), "{shown}");
        assert!(shown.contains("HTTPS_PROXY"), "{shown}");
        assert!(ProxyEnv::default().is_empty());
        assert!(ProxyEnv::default().proxy_for("https://a.example").is_none());
    }
}

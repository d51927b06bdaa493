//! [`PostgresConfig`]: a `postgres://` URL taken apart into the connection settings, the TLS
//! mode (`sslmode`, `sslrootcert`, with libpq's meanings) and a text safe to print
//! ([`crate::store::display_spec`]).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::store::{StoreError, display_spec as redact_url};

/// How the connection is encrypted and the server checked: libpq's `sslmode` values.
///
/// `allow` is not offered: it starts in plain text and only tries TLS when the server insists,
/// which no server this store talks to needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// `sslmode=disable`: plain TCP.
    Disable,
    /// `sslmode=prefer` (libpq's default, and ours): TLS when the server offers it, plain TCP
    /// otherwise; the certificate is not checked, so this protects only against passive listeners.
    Prefer,
    /// `sslmode=require`: TLS or no connection; as in libpq the certificate is not checked.
    Require,
    /// `sslmode=verify-ca`: TLS, and the certificate must chain to a trusted root.
    VerifyCa,
    /// `sslmode=verify-full`: TLS, a trusted chain, and the certificate must name the host.
    VerifyFull,
}

/// Where trusted roots come from for `verify-ca` and `verify-full` (libpq's `sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootCerts {
    /// `sslrootcert=FILE`: the PEM certificates in that file (default
    /// `~/.postgresql/root.crt`, as libpq).
    File(PathBuf),
    /// `sslrootcert=system`: the operating system's trust store.
    System,
}

/// Connection settings of a [`super::PostgresStore`], parsed from a URL
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?PARAMS]` (also `postgresql://`).
///
/// Parameters are tokio-postgres's (`options`, `connect_timeout`, `application_name`, ...) plus
/// libpq's TLS ones: `sslmode` (see [`SslMode`]) and `sslrootcert` (see [`RootCerts`]). Without a
/// password in the URL, `PGPASSWORD` is used, as libpq does. No password is ever part of
/// [`PostgresConfig::redacted`] or of an error.
///
/// # Examples
/// ```
/// use agent_controller::store::postgres::{PostgresConfig, SslMode};
///
/// let config = PostgresConfig::from_url("postgres://app:s3cret@db.internal:5432/agents?sslmode=verify-full")?;
/// assert_eq!(config.ssl_mode(), SslMode::VerifyFull);
/// assert_eq!(config.redacted(), "postgres://app@db.internal:5432/agents?sslmode=verify-full");
/// # Ok::<(), agent_controller::store::StoreError>(())
/// ```
#[derive(Clone)]
pub struct PostgresConfig {
    pub(super) pg: tokio_postgres::Config,
    ssl_mode: SslMode,
    root_certs: RootCerts,
    pool_size: usize,
    redacted: String,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // tokio_postgres::Config's Debug hides the password too, but the URL text is all a reader needs.
        f.debug_struct("PostgresConfig")
            .field("url", &self.redacted)
            .field("ssl_mode", &self.ssl_mode)
            .field("root_certs", &self.root_certs)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

/// Whether `spec` names a PostgreSQL store (`postgres://` or `postgresql://`).
pub fn is_postgres_url(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

fn invalid(url: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::backend_message(format!(
        "invalid PostgreSQL URL `{}`: {what}",
        redact_url(url)
    ))
}

fn decode(url: &str, value: &str) -> Result<String, StoreError> {
    percent_encoding::percent_decode_str(value)
        .decode_utf8()
        .map(|v| v.into_owned())
        .map_err(|e| invalid(url, e))
}

impl PostgresConfig {
    /// The default number of pooled connections (decisions saved at the same time).
    pub const DEFAULT_POOL_SIZE: usize = 16;

    /// Parses a `postgres://` or `postgresql://` URL.
    ///
    /// # Errors
    /// [`StoreError::Backend`] for another scheme, a malformed URL, an unknown `sslmode`, or
    /// `verify-ca`/`verify-full` without readable root certificates (checked when connecting).
    /// The message shows the URL without its password.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        if !is_postgres_url(url) {
            return Err(invalid(
                url,
                "it must start with postgres:// or postgresql://",
            ));
        }
        let (base, query) = match url.split_once('?') {
            Some((b, q)) => (b, q),
            None => (url, ""),
        };
        let mut ssl_mode = SslMode::Prefer;
        let mut root_certs = None;
        let mut passed_on = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => {
                    ssl_mode = match decode(url, value)?.as_str() {
                        "disable" => SslMode::Disable,
                        "prefer" => SslMode::Prefer,
                        "require" => SslMode::Require,
                        "verify-ca" => SslMode::VerifyCa,
                        "verify-full" => SslMode::VerifyFull,
                        other => {
                            return Err(invalid(
                                url,
                                format!(
                                    "sslmode `{other}` is not one of disable, prefer, require, verify-ca, verify-full"
                                ),
                            ));
                        }
                    }
                }
                "sslrootcert" => {
                    let value = decode(url, value)?;
                    root_certs = Some(if value == "system" {
                        RootCerts::System
                    } else {
                        RootCerts::File(PathBuf::from(value))
                    });
                }
                _ => passed_on.push(pair),
            }
        }
        let rest = if passed_on.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", passed_on.join("&"))
        };
        let mut pg: tokio_postgres::Config = rest.parse().map_err(|e| invalid(url, e))?;
        // tokio-postgres knows only disable/prefer/require; verification is done by our rustls config.
        pg.ssl_mode(match ssl_mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        });
        if pg.get_password().is_none()
            && let Some(password) = std::env::var_os("PGPASSWORD")
        {
            pg.password(password.as_encoded_bytes());
        }
        let root_certs = root_certs.unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            RootCerts::File(home.join(".postgresql/root.crt"))
        });
        Ok(Self {
            pg,
            ssl_mode,
            root_certs,
            pool_size: Self::DEFAULT_POOL_SIZE,
            redacted: redact_url(url),
        })
    }

    /// The URL without its password, for messages.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The TLS mode.
    pub fn ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// Where `verify-ca` and `verify-full` take their trusted roots from.
    pub fn root_certs(&self) -> &RootCerts {
        &self.root_certs
    }

    /// How many connections the store keeps at most ([`Self::DEFAULT_POOL_SIZE`] unless set).
    pub fn pool_size(&self) -> usize {
        self.pool_size
    }

    /// Sets how many connections the store keeps at most (at least 1).
    #[must_use]
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// The rustls client configuration for this TLS mode (ring as the crypto provider).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when `verify-ca`/`verify-full` roots cannot be read.
    pub(super) fn tls(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| StoreError::backend("TLS", e))?;
        let config = match self.ssl_mode {
            // No TLS happens with `disable`; `prefer` and `require` encrypt without checking
            // the certificate, as libpq does (use verify-full to know who you talk to).
            SslMode::Disable | SslMode::Prefer | SslMode::Require => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Lax {
                    provider,
                    chain: None,
                }))
                .with_no_client_auth(),
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let roots = Arc::new(self.load_roots()?);
                let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    roots,
                    provider.clone(),
                )
                .build()
                .map_err(|e| StoreError::backend("TLS", e))?;
                if self.ssl_mode == SslMode::VerifyFull {
                    builder.with_webpki_verifier(webpki).with_no_client_auth()
                } else {
                    builder
                        .dangerous()
                        .with_custom_certificate_verifier(Arc::new(Lax {
                            provider,
                            chain: Some(webpki),
                        }))
                        .with_no_client_auth()
                }
            }
        };
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }

    fn load_roots(&self) -> Result<RootCertStore, StoreError> {
        let mut roots = RootCertStore::empty();
        let certs: Vec<CertificateDer<'static>> = match &self.root_certs {
            RootCerts::System => rustls_native_certs::load_native_certs().certs,
            RootCerts::File(path) => CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    StoreError::backend_message(format!(
                        "sslmode={}: cannot read root certificates from {}: {e} (set sslrootcert=FILE or sslrootcert=system)",
                        self.ssl_mode_name(),
                        path.display()
                    ))
                })?,
        };
        roots.add_parsable_certificates(certs);
        if roots.is_empty() {
            return Err(StoreError::backend_message(format!(
                "sslmode={}: no usable root certificate in {:?}",
                self.ssl_mode_name(),
                self.root_certs
            )));
        }
        Ok(roots)
    }

    fn ssl_mode_name(&self) -> &'static str {
        match self.ssl_mode {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The certificate checks of `prefer`/`require` and of `verify-ca`, which rustls's own verifier
/// does not offer: any certificate, or (with `chain`) a trusted chain whatever name the
/// certificate carries. The handshake signatures are checked in both, as rustls's verifier
/// built with the same provider checks them.
#[derive(Debug)]
struct Lax {
    provider: Arc<rustls::crypto::CryptoProvider>,
    /// For `verify-ca`: the verifier whose chain check must pass (its name check is ignored).
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Lax {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_survive_display_spec() {
        for (url, shown) in [
            ("postgres://u:pw@h:5432/db", "postgres://u@h:5432/db"),
            ("postgresql://u:p%40ss@h/db", "postgresql://u@h/db"),
            ("postgres://u@h/db?password=pw", "postgres://u@h/db"),
            (
                "postgres://u:a:b@h/db?sslmode=require&password=x&application_name=a",
                "postgres://u@h/db?sslmode=require&application_name=a",
            ),
            ("postgres://h/db", "postgres://h/db"),
            ("sqlite:x.db", "sqlite:x.db"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn sslmode_and_sslrootcert_are_libpqs() {
        let config =
            PostgresConfig::from_url("postgres://u@h/db?sslmode=verify-ca&sslrootcert=%2Fca.pem")
                .expect("parses");
        assert_eq!(config.ssl_mode(), SslMode::VerifyCa);
        assert_eq!(config.root_certs(), &RootCerts::File("/ca.pem".into()));
        assert_eq!(
            config.pg.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        let plain = PostgresConfig::from_url("postgres://u@h/db").expect("parses");
        assert_eq!(plain.ssl_mode(), SslMode::Prefer);
        let system =
            PostgresConfig::from_url("postgres://u@h/db?sslrootcert=system&sslmode=verify-full")
                .expect("parses");
        assert_eq!(system.root_certs(), &RootCerts::System);
        let err = PostgresConfig::from_url("postgres://u:hunter2@h/db?sslmode=allow")
            .expect_err("allow is refused");
        let text = err.to_string();
        assert!(text.contains("sslmode `allow`"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        let err = PostgresConfig::from_url("mysql://u:hunter2@h/db").expect_err("scheme");
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn verify_modes_build_a_checking_tls_config_or_say_what_is_missing() {
        let missing = PostgresConfig::from_url(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fno%2Fsuch.pem",
        )
        .expect("parses");
        let err = missing.tls().err().expect("no roots").to_string();
        assert!(
            err.contains("/no/such.pem") && err.contains("sslrootcert"),
            "{err}"
        );
        for mode in ["disable", "prefer", "require"] {
            let config = PostgresConfig::from_url(&format!("postgres://u@h/db?sslmode={mode}"))
                .expect("parses");
            assert!(config.tls().is_ok(), "{mode}");
        }
    }

    #[test]
    fn the_url_password_wins_over_pgpassword_and_is_kept_for_connecting() {
        let config = PostgresConfig::from_url("postgres://u:pw@h/db").expect("parses");
        assert_eq!(config.pg.get_password(), Some(&b"pw"[..]));
        assert!(!format!("{config:?}").contains("pw@"));
    }
}

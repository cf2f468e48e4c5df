// Package fallback delivers one alert to one target: an email over SMTP (go-mail) or a JSON
// POST to a webhook (net/http).
//
// It never decides whether to alert, whom to alert or when: the chamber's lifecycle does that,
// records every alert in the private state directory first (for redelivery), calls SendEmail or
// PostWebhook once per target, and then copies the alert, with how each delivery went, to
// messages/outbox/. This package does not import the chamber, never reads the clock, the process
// environment or $HOME (the environment a password command sees is passed in), and never
// retries an email: a failed delivery is the caller's to log and keep.
//
// # Untrusted text
//
// An alert's Message, and often its Reason, come from markers an agent printed, so they are
// treated as hostile. In email headers every control character (CR and LF included), every
// Unicode line or paragraph separator and every format character (bidi overrides) becomes a
// space before go-mail sees it, so no alert can add a header or a recipient. In the body,
// line breaks are kept and other control characters become spaces. Texts are bounded:
// header pieces to a few dozen characters, the message to 64 KiB.
//
// # Email
//
// EmailConfig.TLS is one of "none", "starttls" (use STARTTLS when the server offers it),
// "starttls-required" (fail unless STARTTLS succeeds) or "tls" (implicit TLS, usually port
// 465). Certificates are always verified. With a username, the mechanism is chosen from what
// the server offers: SCRAM-SHA-256, SCRAM-SHA-1, PLAIN, LOGIN, CRAM-MD5, in that order; PLAIN
// and LOGIN are only used over TLS or to a loopback host, so a password is never sent in clear
// over a network. Errors name host:port and the phase that failed (dial, TLS, auth, send) and
// never contain the password.
//
// # Webhooks
//
// PostWebhook sends
//
//	{"chamber": "/abs/path", "session": 12, "reason": "timeout", "message": "...",
//	 "time": "2026-11-22T10:04:51Z", "text": "one paragraph for humans"}
//
// with Content-Type application/json and User-Agent cryochamber. The text field is what Slack
// incoming webhooks (and Discord's Slack-compatible endpoint, the webhook URL plus "/slack")
// show as is; in it &, < and > are escaped as Slack asks, so an alert cannot mention
// @channel or disguise a link. Only http and https URLs are accepted, at most 3 redirects are
// followed and never to another scheme nor from https down to http. Timeouts, connection
// errors and 5xx answers are retried with exponential backoff; other answers are not.
//
// # Verifying a signed webhook
//
// With WebhookConfig.Secret set, every request carries
//
//	X-Cryochamber-Signature: sha256=<hex of HMAC-SHA256(secret, body)>
//	X-Cryochamber-Timestamp: <the alert's time, Unix seconds>
//
// A receiver verifies it by computing HMAC-SHA256 with the shared secret over the raw request
// body exactly as received (before any JSON decoding), hex-encoding it, and comparing it with
// the header value after "sha256=" in constant time (hmac.Equal in Go,
// hmac.compare_digest in Python). Only then does it decode the body. The timestamp header
// repeats the body's signed "time" field; a receiver that wants to reject replays checks that
// the two agree and that the time is recent enough for its taste (alerts are retried, and the
// dead-man alert of a machine that was off may be hours old).
package fallback

package chamber

// secretPurpose says what cryo.toml uses the secret variable k for, in the words of its key, so
// that a refusal names the right table (the sync channel's IMAP password is not an alert's).
func (c *Config) secretPurpose(k string) string {
	switch {
	case c.Email != nil && c.Email.PasswordEnv == k:
		return "[email] password_env, for alert delivery"
	case c.Webhook != nil && c.Webhook.SecretEnv == k:
		return "[webhook] secret_env, for alert delivery"
	}
	if ch := c.Channels; ch != nil {
		switch {
		case ch.Email != nil && ch.Email.PasswordEnv == k:
			return "[channels.email] password_env, for the sync channel"
		case ch.GitHub != nil && ch.GitHub.TokenEnv == k:
			return "[channels.github] token_env, for the sync channel"
		case ch.Zulip != nil && ch.Zulip.TokenEnv == k:
			return "[channels.zulip] token_env, for the sync channel"
		}
	}
	return "as a secret"
}

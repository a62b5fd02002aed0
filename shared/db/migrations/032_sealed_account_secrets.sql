-- Secrets of accounts and keys sealed at rest (D12), as carrier credentials are (migration 015):
-- accounts.verification_secret (the HMAC key of the account's proofs) and api_keys.webhook_secret
-- (the Standard Webhooks signing key) were kept in clear, and so were the server's master secrets
-- (service_secrets: the verification keys' and the onboarding tokens'), so a copy of the database
-- forged "verified" proofs, signed webhooks and read the codes' encrypted copies.
--
-- The sealed forms (AES-256-GCM under CREDENTIALS_KEY, shared/secrets/sealed.ts, each bound to its
-- row) are written by the processes: a migration has no key. The first process that starts with
-- the key seals the rows written before this migration and clears their clear columns
-- (shared/secrets/row-secrets.ts `sealLegacyRowSecrets`, service-secrets.ts
-- `sealLegacyServiceSecrets`, run from services/core.ts); every write after it writes only the
-- sealed form. A clear value is read only while no sealed one exists (a row an older process wrote).
ALTER TABLE accounts ADD COLUMN verification_secret_sealed bytea;
ALTER TABLE api_keys ADD COLUMN webhook_secret_sealed bytea;
-- sealed: `secret` holds the master sealed under CREDENTIALS_KEY (else the 32 bytes themselves, or,
-- for `credentials-key-check`, the key's fingerprint, which is not a secret).
ALTER TABLE service_secrets ADD COLUMN sealed boolean NOT NULL DEFAULT false;

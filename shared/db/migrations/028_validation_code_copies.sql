-- The sessions that still hold an encrypted code copy (few at any moment: a copy is erased when its
-- SMS is handed to the carrier), by expiry: the sweep erases those whose session expired more than a
-- day ago (CodeCopyExpiry, shared/verification/hooks.ts).
CREATE INDEX IF NOT EXISTS validations_code_copies ON validations (expires_at) WHERE code_enc IS NOT NULL;

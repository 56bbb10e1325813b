-- +goose Up
-- Single sign-on with OpenID Connect (SPEC §21). A user signed in by the
-- identity provider is bound to its issuer and subject: later sign-ins find
-- the user by them, never by name. idp_groups are the groups the provider
-- sent at the user's last sign-in (policy deciders idp:<group>). Such a user
-- has no password (password_hash '').

ALTER TABLE users
    ADD COLUMN oidc_issuer   text,
    ADD COLUMN oidc_subject  text,
    ADD COLUMN idp_groups    text[]      NOT NULL DEFAULT '{}',
    ADD COLUMN last_login_at timestamptz,
    ADD CONSTRAINT users_oidc_both CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));

CREATE UNIQUE INDEX users_oidc_idx ON users (oidc_issuer, oidc_subject) WHERE oidc_subject IS NOT NULL;

-- A sign-in under way, between the redirect to the provider and the
-- callback, by the SHA-256 of its state: the nonce, the PKCE verifier (never
-- sent to the browser) and where to go after. A state is taken once.
CREATE TABLE oidc_flows (
    state_hash bytea PRIMARY KEY,
    nonce      text        NOT NULL,
    verifier   text        NOT NULL,
    next       text        NOT NULL DEFAULT '/',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX oidc_flows_expires_idx ON oidc_flows (expires_at);

-- +goose Down
DROP TABLE oidc_flows;
DROP INDEX users_oidc_idx;
ALTER TABLE users
    DROP CONSTRAINT users_oidc_both,
    DROP COLUMN last_login_at,
    DROP COLUMN idp_groups,
    DROP COLUMN oidc_subject,
    DROP COLUMN oidc_issuer;

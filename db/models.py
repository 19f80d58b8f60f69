"""CapLens database schema (SQLAlchemy 2 typed models).

The schema is created and changed only by the Alembic migrations in `db/migrations`;
`tests/db` checks that a freshly migrated database matches these models exactly.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

ROLES = ("annotator", "researcher", "admin")
CAPTION_KINDS = ("reference", "candidate", "perturbed", "transcreated")
TASKS = ("rating", "transcreation", "critical")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _unit_interval(column: str) -> str:
    return f"{column} IS NULL OR ({column} >= 0 AND {column} <= 1)"


class Base(DeclarativeBase):
    # Explicit constraint names keep migrations identical on SQLite and PostgreSQL.
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


collection_captions = Table(
    "collection_captions",
    Base.metadata,
    Column("collection_id", ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True),
    Column("caption_id", ForeignKey("captions.id", ondelete="CASCADE"), primary_key=True, index=True),
)


class User(Base):
    """An account; `role` decides what the workflow functions allow."""

    __tablename__ = "users"
    __table_args__ = (CheckConstraint(_in("role", ROLES), name="role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    # NULL: the account cannot log in (e.g. annotators created by importing their ratings).
    password_hash: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Set by an admin: the account can neither log in nor act until re-enabled.
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    def __repr__(self) -> str:
        return f"User({self.name!r}, role={self.role!r})"


class Collection(Base):
    """A named group of captions (and through them, images) to annotate or export."""

    __tablename__ = "collections"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    # Which rating item the queue serves first (annotation.studies.queue_orders.QUEUE_ORDERS).
    queue_order: Mapped[str] = mapped_column(String(30), default="least-rated", server_default="least-rated")
    # A study's guidelines (Markdown), shown to annotators before their first item and on every item.
    guidelines: Mapped[str | None] = mapped_column(Text)

    captions: Mapped[list[Caption]] = relationship(secondary=collection_captions, back_populates="collections")


class ImportRecord(Base):
    """One completed import (provenance of the captions, images and ratings it created)."""

    __tablename__ = "imports"

    id: Mapped[int] = mapped_column(primary_key=True)
    format: Mapped[str] = mapped_column(String(20))
    source_name: Mapped[str] = mapped_column(String(500))
    source_sha256: Mapped[str] = mapped_column(String(64))
    collection_id: Mapped[int | None] = mapped_column(ForeignKey("collections.id", ondelete="SET NULL"))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    counts: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Image(Base):
    """An image in the content-addressed store; `original_filename` is metadata only."""

    __tablename__ = "images"

    id: Mapped[int] = mapped_column(primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    format: Mapped[str] = mapped_column(String(10))
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(Integer)
    original_filename: Mapped[str | None] = mapped_column(String(500))
    external_id: Mapped[str | None] = mapped_column(String(200), index=True)
    import_id: Mapped[int | None] = mapped_column(ForeignKey("imports.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    captions: Mapped[list[Caption]] = relationship(back_populates="image")


class Caption(Base):
    """A caption of an image: a reference, a model's candidate, a perturbation or a transcreation.

    Perturbed and transcreated captions point at the caption they came from (`parent_id`);
    perturbed ones also record the operation and its parameters (`perturbation`).
    """

    __tablename__ = "captions"
    # (image_id, kind, language): an image's references in one language, read for every item a
    # rating screen shows, stay one index search however many candidates the image has.
    __table_args__ = (CheckConstraint(_in("kind", CAPTION_KINDS), name="kind"),
                      Index("ix_captions_image_id_kind_language", "image_id", "kind", "language"))

    id: Mapped[int] = mapped_column(primary_key=True)
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(Text)
    language: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))
    source_model: Mapped[str | None] = mapped_column(String(200))
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    perturbation_op: Mapped[str | None] = mapped_column(String(40))
    perturbation: Mapped[dict | None] = mapped_column(JSON)
    external_id: Mapped[str | None] = mapped_column(String(200), index=True)
    import_id: Mapped[int | None] = mapped_column(ForeignKey("imports.id", ondelete="SET NULL"), index=True)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    image: Mapped[Image] = relationship(back_populates="captions")
    parent: Mapped[Caption | None] = relationship(remote_side=[id])
    collections: Mapped[list[Collection]] = relationship(secondary=collection_captions, back_populates="captions")


class CriticalAnnotation(Base):
    """Critical objects, backgrounds and relationships of a caption (M-FineCap3k, PR-MCS §4)."""

    __tablename__ = "critical_annotations"
    __table_args__ = (UniqueConstraint("caption_id", "annotator_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    critical_objects: Mapped[list] = mapped_column(JSON)
    backgrounds: Mapped[list] = mapped_column(JSON)
    relationships: Mapped[list] = mapped_column(JSON)
    # The same phrases as character spans of the caption text, [start, end] (end exclusive):
    # {"critical_objects": [[s, e], ...], "backgrounds": [...], "relationships": [...]}.
    spans: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Rating(Base):
    """One annotator's judgement of one caption; earlier values live in `RatingRevision`."""

    __tablename__ = "ratings"
    __table_args__ = (
        UniqueConstraint("caption_id", "annotator_id"),
        CheckConstraint(_unit_interval("overall"), name="overall"),
        CheckConstraint(_unit_interval("fluency"), name="fluency"),
        CheckConstraint(_unit_interval("relevance"), name="relevance"),
        CheckConstraint(_unit_interval("descriptiveness"), name="descriptiveness"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    overall: Mapped[float] = mapped_column(Float)
    fluency: Mapped[float | None] = mapped_column(Float)
    relevance: Mapped[float | None] = mapped_column(Float)
    descriptiveness: Mapped[float | None] = mapped_column(Float)
    version: Mapped[int] = mapped_column(Integer, default=1)
    import_id: Mapped[int | None] = mapped_column(ForeignKey("imports.id", ondelete="SET NULL"))
    # Seconds from the queue offering the item to the first save (NULL: not rated from the queue).
    seconds: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    caption: Mapped[Caption] = relationship()
    annotator: Mapped[User] = relationship()
    revisions: Mapped[list[RatingRevision]] = relationship(
        back_populates="rating", order_by="RatingRevision.version", cascade="all, delete-orphan"
    )


class RatingRevision(Base):
    """The values a rating had before an edit (edit history)."""

    __tablename__ = "rating_revisions"
    __table_args__ = (UniqueConstraint("rating_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    rating_id: Mapped[int] = mapped_column(ForeignKey("ratings.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    overall: Mapped[float] = mapped_column(Float)
    fluency: Mapped[float | None] = mapped_column(Float)
    relevance: Mapped[float | None] = mapped_column(Float)
    descriptiveness: Mapped[float | None] = mapped_column(Float)
    valid_from: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    replaced_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    rating: Mapped[Rating] = relationship(back_populates="revisions")


class Transcreation(Base):
    """A caption re-written in another language so that it keeps its human score."""

    __tablename__ = "transcreations"
    __table_args__ = (
        UniqueConstraint("source_caption_id", "target_language", "annotator_id"),
        CheckConstraint(_unit_interval("source_score"), name="source_score"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    source_caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    result_caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), unique=True)
    target_language: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    source_score: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    source_caption: Mapped[Caption] = relationship(foreign_keys=[source_caption_id])
    result_caption: Mapped[Caption] = relationship(foreign_keys=[result_caption_id])


class QueueSkip(Base):
    """An item an annotator skipped in a queue; the queue does not offer it to them again."""

    __tablename__ = "queue_skips"
    __table_args__ = (
        UniqueConstraint("annotator_id", "caption_id", "task", "language"),
        CheckConstraint(_in("task", TASKS), name="task"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"))
    task: Mapped[str] = mapped_column(String(20))
    # The target language for transcreation skips, "" otherwise (NULLs would defeat the unique key).
    language: Mapped[str] = mapped_column(String(16), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MetricScore(Base):
    """A cached metric value, valid only for the checkpoint it was computed with."""

    __tablename__ = "metric_scores"
    __table_args__ = (UniqueConstraint("caption_id", "metric", "checkpoint_fingerprint"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    metric: Mapped[str] = mapped_column(String(40))
    checkpoint_fingerprint: Mapped[str] = mapped_column(String(128))
    value: Mapped[float | None] = mapped_column(Float)
    computed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AuthSession(Base):
    """A login: the browser (in a cookie) or the API client holds a random token; the database
    keeps only its SHA-256, so a copy of the database logs nobody in. Valid until `expires_at`
    unless revoked (logout)."""

    __tablename__ = "auth_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    client: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class LoginFailure(Base):
    """A login attempt counted as failed (per account name as typed and per client address),
    the basis of login throttling; a successful login deletes its account's rows."""

    __tablename__ = "login_failures"

    id: Mapped[int] = mapped_column(primary_key=True)
    account_name: Mapped[str] = mapped_column(String(100), index=True)
    client: Mapped[str | None] = mapped_column(String(100), index=True)
    failed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class RatingLease(Base):
    """An item of the rating queue reserved for one annotator between `/next_item` and `/rate`:
    while live it counts towards the item's k, so a crowd never rates an item more than k times;
    once `expires_at` passes (the annotator left), the item returns to the queue."""

    __tablename__ = "rating_leases"
    __table_args__ = (UniqueConstraint("caption_id", "annotator_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


INVITE_KINDS = ("invite", "reset")


class Invite(Base):
    """A one-time link an admin hands out: `invite` makes a new account with `role`, `reset`
    sets a new password for `user_id`. The link holds a random token; the database keeps only
    its SHA-256. Valid once, until `expires_at`."""

    __tablename__ = "invites"
    __table_args__ = (CheckConstraint(_in("kind", INVITE_KINDS), name="kind"),
                      CheckConstraint(_in("role", ROLES), name="role"))

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(10))
    role: Mapped[str] = mapped_column(String(20))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AuditEvent(Base):
    """One admin action (account created, invited, disabled, role changed, ...), kept for the
    audit log. Names are copied, so the log outlives deleted accounts."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str | None] = mapped_column(String(100))
    detail: Mapped[dict] = mapped_column(JSON, default=dict)


class ImportStaging(Base):
    """An import being written: its rows go, in committed batches, to the `staged_*` tables,
    which nothing but the import reads; one short transaction then publishes them into the real
    tables and deletes them. A killed import leaves only staging rows, which no user sees and
    `caplens db gc` deletes once `updated_at` (the import's heartbeat) is old."""

    __tablename__ = "import_stagings"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    source_name: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class StagedImage(Base):
    """An image of a staging import (its file is already in the store, named by hash)."""

    __tablename__ = "staged_images"

    staging_id: Mapped[int] = mapped_column(ForeignKey("import_stagings.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    format: Mapped[str] = mapped_column(String(10))
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(Integer)
    original_filename: Mapped[str | None] = mapped_column(String(500))
    external_id: Mapped[str | None] = mapped_column(String(200))


class StagedCaption(Base):
    """A caption of a staging import; `seq` becomes its id offset at publishing, and
    `parent_seq` (a caption of the same import) or `parent_caption_id` (one already published)
    its parent."""

    __tablename__ = "staged_captions"

    staging_id: Mapped[int] = mapped_column(ForeignKey("import_stagings.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    image_sha256: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    language: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))
    source_model: Mapped[str | None] = mapped_column(String(200))
    parent_seq: Mapped[int | None] = mapped_column(Integer)
    parent_caption_id: Mapped[int | None] = mapped_column(Integer)
    perturbation_op: Mapped[str | None] = mapped_column(String(40))
    perturbation: Mapped[dict | None] = mapped_column(JSON)
    external_id: Mapped[str | None] = mapped_column(String(200))


class StagedRating(Base):
    """A rating of a staging import, of the staged caption `caption_seq`, by account `annotator`."""

    __tablename__ = "staged_ratings"

    staging_id: Mapped[int] = mapped_column(ForeignKey("import_stagings.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    caption_seq: Mapped[int] = mapped_column(Integer)
    annotator: Mapped[str] = mapped_column(String(100))
    overall: Mapped[float] = mapped_column(Float)
    fluency: Mapped[float | None] = mapped_column(Float)
    relevance: Mapped[float | None] = mapped_column(Float)
    descriptiveness: Mapped[float | None] = mapped_column(Float)


class StagedCritical(Base):
    """A critical-objects marking of a staging import."""

    __tablename__ = "staged_critical"

    staging_id: Mapped[int] = mapped_column(ForeignKey("import_stagings.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    caption_seq: Mapped[int] = mapped_column(Integer)
    annotator: Mapped[str] = mapped_column(String(100))
    critical_objects: Mapped[list] = mapped_column(JSON)
    backgrounds: Mapped[list] = mapped_column(JSON)
    relationships: Mapped[list] = mapped_column(JSON)
    spans: Mapped[dict] = mapped_column(JSON)


CHECK_KINDS = ("qualification", "gold", "attention")
CHECK_PHASES = ("qualification", "queue")
QUALIFICATION_RESULTS = ("passed", "failed")


class StudySettings(Base):
    """A study's quality control on a collection (annotation.studies.quality): a qualification round
    (`qualification_pass`: the share of qualification items answered within tolerance needed
    to pass; NULL: no round), gold items and attention checks mixed into the queue at
    `check_rate`, and the gold accuracy below which an annotator is flagged (and, with
    `pause_flagged`, paused) once they answered `min_checks` of them."""

    __tablename__ = "study_settings"
    __table_args__ = (CheckConstraint(_unit_interval("qualification_pass"), name="qualification_pass"),
                      CheckConstraint(_unit_interval("check_rate"), name="check_rate"),
                      CheckConstraint(_unit_interval("accuracy_threshold"), name="accuracy_threshold"))

    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True)
    qualification_pass: Mapped[float | None] = mapped_column(Float)
    check_rate: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    accuracy_threshold: Mapped[float | None] = mapped_column(Float)
    min_checks: Mapped[int] = mapped_column(Integer, default=3, server_default="3")
    pause_flagged: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CheckItem(Base):
    """A caption of a study with a known answer: a qualification item, a gold item or an
    attention check (`instruction` tells the annotator what to answer). Its answers go to
    `CheckAnswer`, never to the ratings; the ordinary queue does not offer it."""

    __tablename__ = "check_items"
    __table_args__ = (CheckConstraint(_in("kind", CHECK_KINDS), name="kind"),
                      CheckConstraint(_unit_interval("expected_overall"), name="expected_overall"),
                      CheckConstraint(_unit_interval("tolerance"), name="tolerance"))

    id: Mapped[int] = mapped_column(primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), index=True)
    caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), unique=True)
    kind: Mapped[str] = mapped_column(String(20))
    expected_overall: Mapped[float] = mapped_column(Float)
    tolerance: Mapped[float] = mapped_column(Float)
    instruction: Mapped[str | None] = mapped_column(Text)
    explanation: Mapped[str | None] = mapped_column(Text)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CheckAnswer(Base):
    """An annotator's answer to a check item, in the qualification round (`attempt`) or mixed
    into the queue; the expected value and tolerance are copied, so later edits of the item
    leave the record as it was judged."""

    __tablename__ = "check_answers"
    __table_args__ = (UniqueConstraint("check_item_id", "annotator_id", "attempt"),
                      CheckConstraint(_in("phase", CHECK_PHASES), name="phase"),
                      CheckConstraint(_unit_interval("overall"), name="overall"))

    id: Mapped[int] = mapped_column(primary_key=True)
    check_item_id: Mapped[int] = mapped_column(ForeignKey("check_items.id", ondelete="CASCADE"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    phase: Mapped[str] = mapped_column(String(20))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    overall: Mapped[float] = mapped_column(Float)
    expected: Mapped[float] = mapped_column(Float)
    tolerance: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean)
    seconds: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StudyParticipant(Base):
    """An annotator in a study: their qualification (`attempt`, result, share within tolerance)
    and whether they are flagged or paused for low gold accuracy, and why."""

    __tablename__ = "study_participants"
    __table_args__ = (CheckConstraint(f"qualification IS NULL OR {_in('qualification', QUALIFICATION_RESULTS)}",
                                      name="qualification"),)

    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    qualification: Mapped[str | None] = mapped_column(String(10))
    qualification_score: Mapped[float | None] = mapped_column(Float)
    qualified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    flagged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    paused_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pause_reason: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StudyReviewer(Base):
    """An account a researcher made a reviewer of a study (researchers and admins review any)."""

    __tablename__ = "study_reviewers"

    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Adjudication(Base):
    """A reviewer's settled overall value for an item of a study where annotators disagreed,
    stored beside the raw ratings (which it never changes)."""

    __tablename__ = "adjudications"
    __table_args__ = (UniqueConstraint("collection_id", "caption_id"),
                      CheckConstraint(_unit_interval("overall"), name="overall"))

    id: Mapped[int] = mapped_column(primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    caption_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    reviewer_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    overall: Mapped[float] = mapped_column(Float)
    note: Mapped[str | None] = mapped_column(Text)
    # How many ratings the item had, and their spread (max - min), when it was settled.
    ratings_seen: Mapped[int] = mapped_column(Integer)
    spread: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


PAIR_CATEGORIES = ("HC", "HI", "HM", "MM")  # the Pascal-50S categories (H: human caption, M: machine)
PAIR_CHOICES = ("a", "b", "tie", "skip")


class PairwiseItem(Base):
    """Two captions of one image a study's annotators compare (annotation.studies.pairwise): made from
    the collection's captions of the same image or imported from a pair file. `category` is
    its Pascal-50S category (HC, HI, HM or MM)."""

    __tablename__ = "pairwise_items"
    __table_args__ = (UniqueConstraint("collection_id", "caption_a_id", "caption_b_id"),
                      CheckConstraint("caption_a_id <> caption_b_id", name="two_captions"),
                      CheckConstraint(_in("category", PAIR_CATEGORIES), name="category"))

    id: Mapped[int] = mapped_column(primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), index=True)
    caption_a_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    caption_b_id: Mapped[int] = mapped_column(ForeignKey("captions.id", ondelete="CASCADE"), index=True)
    category: Mapped[str] = mapped_column(String(2))
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    caption_a: Mapped[Caption] = relationship(foreign_keys=[caption_a_id])
    caption_b: Mapped[Caption] = relationship(foreign_keys=[caption_b_id])


class PairwiseJudgment(Base):
    """One annotator's work on a pair: while `choice` is NULL the pair is offered to them and
    reserved until `expires_at` (it counts towards the pair's k, like a rating lease); then
    "a", "b" or "tie" (which caption of the pair is better, whichever side it was shown on) or
    "skip". `a_left`: caption A was shown on the left."""

    __tablename__ = "pairwise_judgments"
    __table_args__ = (UniqueConstraint("item_id", "annotator_id"),
                      CheckConstraint(f"choice IS NULL OR {_in('choice', PAIR_CHOICES)}", name="choice"))

    id: Mapped[int] = mapped_column(primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("pairwise_items.id", ondelete="CASCADE"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    choice: Mapped[str | None] = mapped_column(String(4))
    a_left: Mapped[bool] = mapped_column(Boolean)
    offered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    seconds: Mapped[float | None] = mapped_column(Float)
    version: Mapped[int] = mapped_column(Integer, default=1)

    item: Mapped[PairwiseItem] = relationship()


STAGING_TABLES = ("import_stagings", "staged_images", "staged_captions", "staged_ratings", "staged_critical")

"""Registering clones and creating worktrees beside them, with real git."""

import os

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError

from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import Event
from tests.factories import UserFactory
from tests.workspaces.conftest import commit_file, git
from workspaces.models import Repository, Workspace, Worktree
from workspaces.worktrees import services as worktrees
from workspaces.worktrees.services import repository_register, worktree_create, worktree_remove

pytestmark = pytest.mark.django_db


def _branches(folder) -> set[str]:
    return set(git(folder, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


# --- Registering ----------------------------------------------------------------------------


def test_register_stores_the_real_path_default_branch_and_sync_folder(clone, code_dir):
    # when
    repository, created = repository_register(path=str(clone))

    # then
    assert created is True
    assert (repository.name, repository.path, repository.default_branch) == ("app", str(clone), "main")
    assert repository.sync_dir == str(code_dir / "sync" / "app")
    assert (code_dir / "sync" / "app").is_dir()


def test_register_again_through_other_spellings_is_the_same_row(clone, code_dir):
    # given
    first, _ = repository_register(path=str(clone))
    os.symlink(clone, code_dir / "app-link")

    # when
    spellings = [f"{clone}/", f"{code_dir}/./app", f"{code_dir}/sync/../app/", str(code_dir / "app-link")]
    results = [repository_register(path=spelling) for spelling in spellings]

    # then
    assert [(repository.pk, created) for repository, created in results] == [(first.pk, False)] * 4
    assert list(Repository.objects.values_list("path", flat=True)) == [str(clone)]


def test_register_refuses_a_folder_that_is_not_a_clone_top(clone, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(DomainError) as not_git:
        repository_register(path=str(plain))
    with pytest.raises(DomainError) as inside:
        repository_register(path=str(clone / "src"))
    assert (not_git.value.code, inside.value.code) == ("invalid", "invalid")
    assert "not inside a git clone" in not_git.value.message
    assert f"is inside the clone at {clone}" in inside.value.message
    assert Repository.objects.count() == 0


def test_register_refuses_a_linked_worktree(repository, actor, code_dir):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="login")
    with pytest.raises(DomainError, match="register the main clone"):
        repository_register(path=worktree.real_path)
    assert Repository.objects.count() == 1


def test_register_updates_branch_and_sync_folder_but_not_the_name(clone, tmp_path):
    # given
    repository, _ = repository_register(path=str(clone), name="web")

    # when
    again, created = repository_register(path=str(clone), default_branch="develop", sync_dir=str(tmp_path / "cfg"))

    # then
    assert (again.pk, created, again.name, again.default_branch) == (repository.pk, False, "web", "develop")
    assert again.sync_dir == str(tmp_path / "cfg") and (tmp_path / "cfg").is_dir()
    with pytest.raises(DomainError) as renamed:
        repository_register(path=str(clone), name="other")
    assert renamed.value.code == "conflict"
    assert Repository.objects.get().name == "web"


def test_register_refuses_a_name_another_clone_has(clone, code_dir):
    repository_register(path=str(clone), name="app")
    second = code_dir / "second"
    second.mkdir()
    git(second, "init", "-q", "-b", "main")
    with pytest.raises(DomainError) as taken:
        repository_register(path=str(second), name="app")
    assert taken.value.code == "conflict"
    assert Repository.objects.count() == 1


def test_register_command(clone, capsys):
    call_command("register_repository", f"{clone}/", "--name", "shop", "--default-branch", "main")
    call_command("register_repository", str(clone))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"Registered shop (id {Repository.objects.get().pk}): {clone}")
    assert out[1].startswith("Already registered shop")
    with pytest.raises(CommandError, match="not inside a git clone"):
        call_command("register_repository", str(clone.parent))


# --- Creating -------------------------------------------------------------------------------


def test_create_makes_branch_and_folder_beside_the_clone(repository, actor, clone, code_dir):
    # when
    worktree, created = worktree_create(actor=actor, repository=repository, type="feat", name="user-auth")

    # then
    folder = code_dir / "feat-user-auth"
    assert created is True
    assert (worktree.type, worktree.name, worktree.branch) == ("feat", "user-auth", "feat-user-auth")
    assert worktree.real_path == str(folder)
    assert git(folder, "branch", "--show-current").strip() == "feat-user-auth"
    assert git(folder, "rev-parse", "HEAD") == git(clone, "rev-parse", "main")
    assert git(clone, "branch", "--show-current").strip() == "main"
    assert worktree.workspace.kind == Workspace.Kind.WORKTREE
    assert worktree.workspace.root_path == str(folder)
    event = Event.objects.get(name="worktree.created")
    assert (event.subject_id, event.actor) == (str(worktree.pk), "agent:claude-1")
    assert event.payload == {
        "repository": repository.pk,
        "branch": "feat-user-auth",
        "path": str(folder),
        "revived": False,
    }


def test_create_again_returns_the_same_row_and_runs_no_git(repository, actor, monkeypatch):
    # given
    first, _ = worktree_create(actor=actor, repository=repository, type="fix", name="crash")
    monkeypatch.setattr(worktrees.git, "git_worktree_add", _must_not_run)

    # when
    again, created = worktree_create(actor=actor, repository=repository, type="fix", name="crash")

    # then
    assert (again.pk, created) == (first.pk, False)
    assert Worktree.objects.count() == 1
    assert Event.objects.filter(name="worktree.created").count() == 1


def _must_not_run(*args, **kwargs):
    raise AssertionError("git worktree add ran again")


def test_create_from_a_ref_starts_the_branch_there(repository, actor, clone, code_dir):
    first_commit = git(clone, "rev-list", "--max-parents=0", "HEAD").strip()
    worktree, _ = worktree_create(actor=actor, repository=repository, type="exp", name="old", ref=first_commit[:10])
    assert git(code_dir / "exp-old", "rev-parse", "HEAD").strip() == first_commit
    assert worktree.branch == "exp-old"


def test_review_worktree_checks_out_a_ref(repository, actor, clone, code_dir):
    # given a branch with a commit main does not have
    git(clone, "branch", "contrib")
    git(clone, "checkout", "-q", "contrib")
    sha = commit_file(clone, "docs/notes.md", "notes\n", "Notes")
    git(clone, "checkout", "-q", "main")

    # when
    worktree, created = worktree_create(actor=actor, repository=repository, type="review", name="notes", ref="contrib")

    # then
    assert created is True
    folder = code_dir / "review-notes"
    assert git(folder, "rev-parse", "HEAD").strip() == sha
    assert git(folder, "branch", "--show-current").strip() == "review-notes"
    assert (folder / "docs" / "notes.md").read_text() == "notes\n"


def test_review_worktree_fetches_a_pull_request_from_origin(repository, actor, clone, code_dir, origin):
    # when
    worktree, created = worktree_create(actor=actor, repository=repository, type="review", name="7", pr_number=7)

    # then
    folder = code_dir / "review-7"
    assert (created, worktree.pr_number, worktree.branch) == (True, 7, "review-7")
    assert git(folder, "rev-parse", "HEAD").strip() == origin["pr_sha"]
    assert git(clone, "rev-parse", "review-7").strip() == origin["pr_sha"]
    assert (folder / "src" / "login.py").exists()


def test_pull_request_without_a_remote_is_a_clear_409(repository, actor, code_dir):
    with pytest.raises(DomainError) as refused:
        worktree_create(actor=actor, repository=repository, type="review", name="7", pr_number=7)
    assert refused.value.code == "conflict"
    assert refused.value.message == "The repository has no 'origin' remote to fetch pull request #7 from."
    assert Worktree.objects.count() == 0
    assert not (code_dir / "review-7").exists()


def test_unknown_pull_request_is_409_with_gits_message(repository, actor, origin, code_dir):
    with pytest.raises(DomainError) as refused:
        worktree_create(actor=actor, repository=repository, type="review", name="8", pr_number=8)
    assert refused.value.code == "conflict"
    assert "refs/pull/8/head" in refused.value.message
    assert Worktree.objects.count() == 0
    assert not (code_dir / "review-8").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": "Feat", "name": "x"}, "type must be"),
        ({"type": "feat", "name": "-x"}, "name must be"),
        ({"type": "feat", "name": "a_b"}, "name must be"),
        ({"type": "feat", "name": "x\n"}, "name must be"),
        ({"type": "feat", "name": "x" * 65}, "name must be"),
        ({"type": "t" * 33, "name": "x"}, "type must be"),
        ({"type": "review", "name": "x"}, "needs the ref or the pr_number"),
        ({"type": "feat", "name": "x", "ref": "--upload-pack=evil"}, "is not a ref"),
        ({"type": "feat", "name": "x", "ref": "main:refs/heads/x"}, "is not a ref"),
        ({"type": "feat", "name": "x", "ref": "main", "pr_number": 1}, "not both"),
    ],
)
def test_bad_create_input_is_refused_before_git_runs(repository, actor, code_dir, kwargs, message):
    with pytest.raises(DomainError, match=message) as refused:
        worktree_create(actor=actor, repository=repository, **kwargs)
    assert refused.value.code == "invalid"
    assert Worktree.objects.count() == 0
    assert sorted(os.listdir(code_dir)) == ["app", "sync"]


def test_unknown_ref_is_409(repository, actor):
    with pytest.raises(DomainError, match="names no commit") as refused:
        worktree_create(actor=actor, repository=repository, type="feat", name="x", ref="no-such-branch")
    assert refused.value.code == "conflict"
    assert Worktree.objects.count() == 0


def test_a_person_who_is_not_staff_cannot_create(repository):
    with pytest.raises(DomainError) as refused:
        worktree_create(actor=Actor(user=UserFactory()), repository=repository, type="feat", name="x")
    assert refused.value.code == "forbidden"
    assert Worktree.objects.count() == 0


# --- One folder, one row --------------------------------------------------------------------


def test_a_symlink_beside_the_clone_to_a_worktree_is_that_worktree(repository, actor, code_dir):
    # given feat-login, and feat-alias -> feat-login beside it
    login, _ = worktree_create(actor=actor, repository=repository, type="feat", name="login")
    os.symlink("feat-login", code_dir / "feat-alias")

    # when
    alias, created = worktree_create(actor=actor, repository=repository, type="feat", name="alias")

    # then
    assert (alias.pk, created) == (login.pk, False)
    assert Worktree.objects.count() == 1


def test_a_symlink_leading_away_from_the_clone_is_refused(repository, actor, code_dir, tmp_path):
    os.symlink(tmp_path / "elsewhere", code_dir / "feat-away")
    with pytest.raises(DomainError, match="not beside the clone") as refused:
        worktree_create(actor=actor, repository=repository, type="feat", name="away")
    assert refused.value.code == "conflict"
    assert not (tmp_path / "elsewhere").exists()
    assert Worktree.objects.count() == 0


def test_two_type_name_splits_of_one_folder_are_one_row(repository, actor):
    first, _ = worktree_create(actor=actor, repository=repository, type="feat", name="a-b")
    second, created = worktree_create(actor=actor, repository=repository, type="feat-a", name="b")
    assert (second.pk, created) == (first.pk, False)
    assert Worktree.objects.count() == 1


def test_the_unique_real_path_turns_a_lost_race_into_the_existing_row(repository, actor, monkeypatch):
    # given a row for the folder that the pre-check does not see (as if inserted meanwhile)
    winner, _ = worktree_create(actor=actor, repository=repository, type="feat", name="race")
    real_lookup = worktrees._worktree_existing
    calls = []

    def blind_first(**kwargs):
        calls.append(kwargs)
        return None if len(calls) == 1 else real_lookup(**kwargs)

    monkeypatch.setattr(worktrees, "_worktree_existing", blind_first)
    monkeypatch.setattr(worktrees.git, "git_worktree_add", _must_not_run)

    # when the insert hits the unique constraint
    again, created = worktree_create(actor=actor, repository=repository, type="feat", name="race")

    # then it answers with the row that won
    assert (again.pk, created, len(calls)) == (winner.pk, False, 2)
    assert Worktree.objects.count() == 1


def test_the_database_refuses_a_second_row_for_one_real_path(repository):
    Worktree.objects.create(repository=repository, type="feat", name="x", branch="feat-x", real_path="/srv/a/feat-x")
    with pytest.raises(IntegrityError):
        Worktree.objects.create(repository=repository, type="fix", name="y", branch="fix-y", real_path="/srv/a/feat-x")


def test_a_folder_git_already_has_is_adopted_after_a_crash(repository, actor, clone, code_dir):
    # given git made the worktree but the row was never committed
    git(clone, "worktree", "add", "-q", "-b", "feat-crash", str(code_dir / "feat-crash"), "main")

    # when
    worktree, created = worktree_create(actor=actor, repository=repository, type="feat", name="crash")

    # then
    assert (created, worktree.real_path) == (True, str(code_dir / "feat-crash"))
    assert git(code_dir / "feat-crash", "branch", "--show-current").strip() == "feat-crash"


def test_a_folder_in_the_way_is_409_and_left_alone(repository, actor, code_dir):
    (code_dir / "feat-busy").mkdir()
    (code_dir / "feat-busy" / "keep.txt").write_text("mine")
    with pytest.raises(DomainError) as refused:
        worktree_create(actor=actor, repository=repository, type="feat", name="busy")
    assert refused.value.code == "conflict"
    assert "already exists" in refused.value.message
    assert os.listdir(code_dir / "feat-busy") == ["keep.txt"]
    assert Worktree.objects.count() == 0


def test_create_after_remove_revives_the_row_on_its_branch(repository, actor, staff_actor, code_dir):
    # given a worktree with a commit, then removed
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="again")
    sha = commit_file(code_dir / "feat-again", "new.txt", "x\n", "Work")
    worktree_remove(actor=staff_actor, worktree=worktree)
    assert not (code_dir / "feat-again").exists()

    # when
    revived, created = worktree_create(actor=actor, repository=repository, type="feat", name="again")

    # then
    assert (revived.pk, created, revived.status) == (worktree.pk, True, Worktree.Status.ACTIVE)
    assert git(code_dir / "feat-again", "rev-parse", "HEAD").strip() == sha
    assert revived.workspace.status == Workspace.Status.ACTIVE
    assert Event.objects.filter(name="worktree.created").count() == 2
    assert [e.payload["revived"] for e in Event.objects.filter(name="worktree.created").order_by("id")] == [False, True]
    assert "feat-again" in _branches(code_dir / "app")

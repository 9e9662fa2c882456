"""Where the Kafka connector comes from: the jar directory first, else Maven Central."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkapy_spark import jars
from kafkapy_spark.jars import (
    HOW_TO_PROVIDE,
    JARS_DIR_ENV,
    ConnectorUnavailable,
    artifact_name,
    jars_from_directory,
    maven_coordinates,
    resolve_connector,
)

CONNECTOR = "spark-sql-kafka-0-10_2.13"
TOKEN = "spark-token-provider-kafka-0-10_2.13"


def make_jars(directory: Path, *names: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"PK\x03\x04 not really a jar")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point both the jar directory and the java-clients cache at empty temp dirs."""
    monkeypatch.setenv("KAFKAPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(JARS_DIR_ENV, raising=False)
    return tmp_path


def test_complete_directory_gives_local_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "jars"
    make_jars(directory, f"{CONNECTOR}-4.0.1.jar", f"{TOKEN}-4.0.1.jar", "commons-pool2-2.12.0.jar",
              "kafka-clients-3.9.0.jar")
    monkeypatch.setenv(JARS_DIR_ENV, str(directory))
    connector = resolve_connector("4.0.1")
    assert [jar.name for jar in connector.jars] == [
        f"{CONNECTOR}-4.0.1.jar", f"{TOKEN}-4.0.1.jar", "commons-pool2-2.12.0.jar", "kafka-clients-3.9.0.jar",
    ]
    assert connector.packages is None
    assert connector.spark_conf() == {"spark.jars": ",".join(str(jar) for jar in connector.jars)}


def test_default_directory_is_under_the_cache(tmp_path: Path) -> None:
    assert jars.jars_dir() == tmp_path / "cache" / "spark-jars"


def test_exact_version_wins_over_other_patch_release(tmp_path: Path) -> None:
    make_jars(tmp_path, f"{CONNECTOR}-4.0.0.jar", f"{CONNECTOR}-4.0.5.jar", f"{TOKEN}-4.0.0.jar",
              "commons-pool2-2.12.0.jar", "kafka-clients-3.9.1.jar")
    connector = jars_from_directory(tmp_path, "4.0.5")
    assert connector is not None
    assert connector.jars[0].name == f"{CONNECTOR}-4.0.5.jar"
    assert connector.jars[1].name == f"{TOKEN}-4.0.0.jar"  # same minor release is accepted


def test_other_minor_release_is_not_used(tmp_path: Path) -> None:
    make_jars(tmp_path, f"{CONNECTOR}-3.5.1.jar", f"{TOKEN}-3.5.1.jar", "commons-pool2-2.12.0.jar",
              "kafka-clients-3.9.1.jar")
    assert jars_from_directory(tmp_path, "4.0.5") is None


def test_scala_2_12_jars_for_spark_3_5(tmp_path: Path) -> None:
    make_jars(tmp_path, "spark-sql-kafka-0-10_2.12-3.5.7.jar", "spark-token-provider-kafka-0-10_2.12-3.5.7.jar",
              "commons-pool2-2.11.1.jar", "kafka-clients-3.4.1.jar", f"{CONNECTOR}-3.5.7.jar")
    connector = jars_from_directory(tmp_path, "3.5.7")
    assert connector is not None
    assert [jar.name for jar in connector.jars[:2]] == [
        "spark-sql-kafka-0-10_2.12-3.5.7.jar", "spark-token-provider-kafka-0-10_2.12-3.5.7.jar"]


def fake_maven(found: list[str], calls: list[tuple]):
    def maven_connector_jars(spark_version: str, pyspark_jars_dir):
        calls.append((spark_version, pyspark_jars_dir))
        return [Path(name) for name in found]
    return maven_connector_jars


@pytest.mark.parametrize("missing", [CONNECTOR, TOKEN, "commons-pool2", "kafka-clients"])
def test_incomplete_directory_falls_back_to_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   missing: str) -> None:
    directory = tmp_path / "jars"
    names = [f"{CONNECTOR}-4.0.5.jar", f"{TOKEN}-4.0.5.jar", "commons-pool2-2.12.0.jar", "kafka-clients-3.9.1.jar"]
    make_jars(directory, *(name for name in names if not name.startswith(missing)))
    monkeypatch.setenv(JARS_DIR_ENV, str(directory))
    calls: list[tuple] = []
    monkeypatch.setattr(jars, "maven_connector_jars", fake_maven(["/m2/kafka-clients-3.9.0.jar"], calls))
    connector = resolve_connector("4.0.5")
    assert calls == [("4.0.5", None)]
    assert connector.jars == [Path("/m2/kafka-clients-3.9.0.jar")] and connector.packages is None
    assert "Maven Central" in connector.source


def test_maven_failure_names_both_ways_to_provide_the_jars(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(spark_version: str, pyspark_jars_dir):
        raise ConnectorUnavailable("org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0 from Maven Central: offline")
    monkeypatch.setattr(jars, "maven_connector_jars", unreachable)
    with pytest.raises(ConnectorUnavailable) as failure:
        resolve_connector("4.0.0")
    assert "offline" in str(failure.value) and JARS_DIR_ENV in str(failure.value)


def test_other_patch_release_uses_the_pinned_connector(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def maven(spark_version: str, pyspark_jars_dir):
        calls.append(spark_version)
        if spark_version != "4.0.0":
            raise ConnectorUnavailable(f"{spark_version} is not on Maven Central")
        return [Path("/m2/spark-sql-kafka-0-10_2.13-4.0.0.jar")]
    monkeypatch.setattr(jars, "maven_connector_jars", maven)
    connector = resolve_connector("4.0.5")
    assert calls == ["4.0.5", "4.0.0"]
    assert connector.source == "Maven Central (org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0)"


def test_artifact_names_without_versions() -> None:
    assert artifact_name("/x/kafka-clients-3.4.1.jar") == "kafka-clients"
    assert artifact_name("spark-sql-kafka-0-10_2.12-3.5.7.jar") == "spark-sql-kafka-0-10_2.12"
    assert artifact_name("scala-parallel-collections_2.13-1.2.0.jar") == "scala-parallel-collections_2.13"
    assert artifact_name("zstd-jni-1.5.6-4.jar") == "zstd-jni"
    assert artifact_name("commons-pool2-2.12.0.jar") == "commons-pool2"


def test_empty_jar_file_does_not_count(tmp_path: Path) -> None:
    make_jars(tmp_path, f"{CONNECTOR}-4.0.0.jar", f"{TOKEN}-4.0.0.jar", "commons-pool2-2.12.0.jar")
    (tmp_path / "kafka-clients-3.9.1.jar").write_bytes(b"")
    assert jars_from_directory(tmp_path, "4.0.0") is None


def test_maven_coordinates_match_the_pyspark_version() -> None:
    assert maven_coordinates("4.0.2") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.2"
    assert maven_coordinates("3.5.7") == "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7"


def test_how_to_provide_is_one_line_naming_the_directory_variable() -> None:
    assert "\n" not in HOW_TO_PROVIDE
    assert JARS_DIR_ENV in HOW_TO_PROVIDE and "Maven Central" in HOW_TO_PROVIDE

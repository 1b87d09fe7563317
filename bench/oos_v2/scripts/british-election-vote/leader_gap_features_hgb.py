# idiom: leader-rating gaps computed with DataFrame.eval, a Eurosceptic x knowledge interaction and a mean economic outlook, multiclass HistGradientBoosting with early stopping, output columns from a dict comprehension over clf.classes_; intended: valid
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")


def engineer(df):
    df = df.copy()
    df["blair_minus_hague"] = df.eval("Blair - Hague")
    df["blair_minus_kennedy"] = df.eval("Blair - Kennedy")
    df["hague_minus_kennedy"] = df.eval("Hague - Kennedy")
    df["euro_x_knowledge"] = df["Europe"] * df["political.knowledge"]
    df["econ_mean"] = df[["economic.cond.national", "economic.cond.household"]].mean(axis=1)
    df["female"] = (df["gender"] == "female").astype(int)
    return df.drop(columns=["gender"])


train, test = engineer(train), engineer(test)
features = [c for c in train.columns if c not in ("id", "vote")]

clf = HistGradientBoostingClassifier(learning_rate=0.05, max_iter=400, max_leaf_nodes=8, min_samples_leaf=25,
                                     l2_regularization=0.5, early_stopping=True, validation_fraction=0.2,
                                     n_iter_no_change=20, random_state=4)
clf.fit(train[features], train["vote"])
print("boosting rounds kept:", clf.n_iter_)

proba = clf.predict_proba(test[features])
out = pd.DataFrame({"id": test["id"], **{party: proba[:, i] for i, party in enumerate(clf.classes_)}})
out.to_csv("submission.csv", index=False)
print(out.head())

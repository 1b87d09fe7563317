# idiom: dict of candidate models compared with cross_val_score in a loop, best one refit on all rows; intended: valid
import warnings

import pandas as pd
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import QuantileTransformer

warnings.filterwarnings("ignore")

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
y = train.pop("yesno").map({"n": 0, "y": 1})
ids = test.pop("id")
train = train.drop(columns="id")

models = {
    "logreg": Pipeline([("q", QuantileTransformer(n_quantiles=200, output_distribution="normal")),
                        ("lr", LogisticRegression(max_iter=2000))]),
    "knn": Pipeline([("q", QuantileTransformer(n_quantiles=200)), ("knn", KNeighborsClassifier(n_neighbors=25))]),
    "rf": RandomForestClassifier(n_estimators=300, min_samples_leaf=2, n_jobs=1, random_state=0),
    "extra_trees": ExtraTreesClassifier(n_estimators=300, min_samples_leaf=2, n_jobs=1, random_state=0),
}

results = {}
for name, model in models.items():
    scores = cross_val_score(model, train, y, cv=3, scoring="roc_auc")
    results[name] = scores.mean()
    print(f"{name:12s} AUC {scores.mean():.4f} +/- {scores.std():.4f}")

best_name = max(results, key=results.get)
print("best model:", best_name)
best = models[best_name].fit(train, y)
pd.DataFrame({"id": ids, "yesno": best.predict_proba(test)[:, 1]}).to_csv("submission.csv", index=False)
